"""A consumer's own report of what it did, turned into history events.

The broker tells the harness little about deliveries (a passive declare counts ready messages
and consumers, not deliveries or acks), so a consumer that offers an events feed
(``[hooks] events``) lets the history hold each delivery with its redelivered flag, each commit
and each ack.  The feed is read from every consumer, as the scenario waits, so events land in
the history close to when they happened.  A consumer without a feed is judged from effects,
publishes and queue state alone.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import TYPE_CHECKING, Any

from harness._errors import ServiceError
from harness._history import History
from harness.consumer._broker import FEED_KINDS

if TYPE_CHECKING:
    from harness.consumer._deployment import ConsumerDeployment

__all__ = ["FEED_KINDS", "EventFeed"]


class EventFeed:
    """Reads the feed into one scenario's history.  Where each consumer's feed was read up to
    is kept on the deployment, so a scenario never records what happened in the one before."""

    def __init__(self, deployment: ConsumerDeployment, history: History) -> None:
        self.deployment = deployment
        self.history = history
        self._after = deployment.feed_cursors
        self._deliveries: Counter[str] = Counter()
        self._paused: Counter[str] = Counter()
        self._lock = threading.Lock()

    def skip(self) -> None:
        """Move every cursor past what the consumers reported so far, recording nothing."""
        self.poll(record=False)

    def poll(self, *, record: bool = True) -> None:
        """Read every running consumer's new events into the history."""
        hook = self.deployment.target.hooks.events
        if hook is None:
            return
        with self._lock:
            for instance in self.deployment.instances:
                if not instance.process.running():
                    continue
                cursor = (instance.number, instance.process.pid)
                try:
                    data = self.deployment.hook("GET", hook.path, number=instance.number,
                                                query={"after": self._after.get(cursor, 0)})
                except ServiceError:
                    continue  # a consumer being killed or restarted: its events come next time
                for item in data.get("events", []) if isinstance(data, dict) and record else []:
                    self._record(instance.name, item, instance.process.pid)
                if isinstance(data, dict) and isinstance(data.get("next"), int):
                    self._after[cursor] = data["next"]

    def _record(self, process: str, item: dict[str, Any], pid: int | None) -> None:
        kind = self.deployment.broker.feed_kind(item)
        if kind is None:
            return
        key = item.get("key")
        value = {k: v for k, v in item.items()
                 if k not in ("type", "key", "time") and v is not None}
        if kind != item.get("type"):  # the broker's own word for it (Kafka's offset-commit)
            value["as"] = item.get("type")
        value.setdefault("pid", pid)
        if isinstance(item.get("time"), int | float):
            # When the consumer says it happened: feeds are read one process after another, so
            # the history's order between two processes is only the order they were read in.
            value["at"] = item["time"]
        self.history.record("ok", kind, process, key=key if isinstance(key, str) else None,
                            value=value)
        if isinstance(key, str):
            if kind == "deliver":
                self._deliveries[key] += 1
            if kind == "pause":
                self._paused[key] += 1

    def delivered(self, key: str) -> int:
        return self._deliveries[key]

    def paused(self, key: str) -> int:
        return self._paused[key]

    def live(self) -> list[tuple[str, int | None]]:
        """The consumer processes running now, as (name, pid)."""
        return [(i.name, i.process.pid) for i in self.deployment.instances
                if i.process.running()]

    def polled_every_process(self) -> bool:
        """Has the feed of every running process been read at least once?  A process started
        again has a new pid: until its feed is read, what it took is not known."""
        return all((i.number, i.process.pid) in self._after
                   for i in self.deployment.instances if i.process.running())

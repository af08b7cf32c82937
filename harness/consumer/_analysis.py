"""A read-only view of a consumer's history that its properties share.

Publishes by dedup key, what the consumer reported (deliveries, acks), what the drain found
left in the queue or dead-lettered, and the incidents (kills, cut or stalled connections) that
messages lived through.

It builds on the HTTP ``View`` for what both share: effects per key, the target's clock,
crashes, fault windows and evidence around a time span.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from harness._history import Event
from harness.judging._analysis import View

__all__ = ["Incident", "Publish", "QueueView"]


@dataclass(frozen=True, slots=True)
class Publish:
    """One publish and its confirm (None: the history ends before one came)."""

    invoke: Event
    completion: Event | None

    @property
    def key(self) -> str | None:
        return self.invoke.key

    @property
    def confirmed(self) -> bool:
        return self.completion is not None and self.completion.type == "ok"

    @property
    def maybe_queued(self) -> bool:
        """Confirmed, or unknown (no confirm came: it may be queued)."""
        return self.completion is None or self.completion.type in ("ok", "info")

    @property
    def poison(self) -> bool:
        """A message that can never have an effect: the consumer refuses it (poison), or the
        harness made its job fail on every delivery."""
        fails = self.invoke.value.get("fails") or {}
        return bool(self.invoke.value.get("poison")) or fails.get("deliveries") == "every"

    @property
    def fails(self) -> str | None:
        """Where the harness made this message's job fail (``before-work``, ``after-work``)."""
        fails = self.invoke.value.get("fails") or {}
        return str(fails["when"]) if "when" in fails else None

    @property
    def message_id(self) -> str | None:
        value = self.invoke.value.get("message_id")
        return str(value) if value is not None else None

    @property
    def indices(self) -> tuple[int, ...]:
        return (self.invoke.index,) + ((self.completion.index,) if self.completion else ())

    def describe(self) -> str:
        outcome = ("confirmed" if self.confirmed else "refused" if self.completion is not None
                   and self.completion.type == "fail" else "no confirm")
        return f"{self.invoke.label or 'publish'} {outcome} (message {self.message_id})"


@dataclass(frozen=True, slots=True)
class Incident:
    """Something that may have cost a consumer its unacked messages: a kill, or its broker
    connection cut or stalled."""

    what: str
    start: Event
    end: Event


class QueueView:
    def __init__(self, view: View) -> None:
        self.view = view
        events = view.events
        completions = {e.op: e for e in events if e.f == "publish" and e.type != "invoke"}
        self.publishes: dict[str, list[Publish]] = defaultdict(list)
        for event in events:
            if event.f == "publish" and event.type == "invoke" and event.key is not None:
                self.publishes[event.key].append(Publish(event, completions.get(event.op)))
        self.by_kind: dict[str, dict[str, list[Event]]] = defaultdict(lambda: defaultdict(list))
        for event in events:
            if event.f in ("deliver", "commit", "ack", "nack", "requeue", "dead-letter", "skip",
                           "leftover", "dead-lettered", "work-failed") and event.key is not None:
                self.by_kind[event.f][event.key].append(event)
        self.drains = [e for e in events if e.f == "drain"]
        self.reports_deliveries = any(e.f == "deliver" for e in events)

    @property
    def drained(self) -> Event | None:
        """The last drain, when it found the queue settled."""
        last = self.drains[-1] if self.drains else None
        return last if last is not None and last.type == "ok" else None

    def ordinary(self) -> list[tuple[str, list[Publish]]]:
        return [(k, p) for k, p in self.publishes.items() if not any(x.poison for x in p)]

    def poisoned(self) -> list[tuple[str, list[Publish]]]:
        return [(k, p) for k, p in self.publishes.items() if any(x.poison for x in p)]

    def events_of(self, kind: str, key: str) -> list[Event]:
        return self.by_kind[kind].get(key, [])

    def incidents(self) -> list[Incident]:
        found = [Incident("the consumer was killed", c, c) for c in self.view.crashes]
        for fault, heal in self.view.fault_windows:
            if fault.value.get("where") != "consumer":
                continue
            name = str(fault.value.get("fault"))
            end = heal or self.view.events[-1]
            killed = any(fault.time <= c.time <= end.time for c in self.view.crashes)
            what = {"ack-held": "its ack was held back and "
                                + ("it was killed" if killed else "its connection cut"),
                    "connection-stall": "its broker connection stalled",
                    "connection-cut": "its broker connection was cut",
                    "poll-interval-outlived": "its job outlived the poll interval and its "
                                              "partition went to another member"}.get(name, name)
            found.append(Incident(f"the consumer's {what}".replace("the consumer's its ",
                                                                   "the consumer's "),
                                  fault, end))
        return sorted(found, key=lambda i: i.start.time)

    def story(self, key: str) -> str:
        """What happened to ``key``'s messages, in a line: publishes, deliveries, acks."""
        parts = [p.describe() for p in self.publishes.get(key, [])]
        delivered = self.events_of("deliver", key)
        if delivered:
            again = sum(1 for d in delivered if d.value.get("redelivered"))
            parts.append(f"delivered {len(delivered)} time(s)"
                         + (f", {again} of them redelivered" if again else ""))
        acks = self.events_of("ack", key)
        if acks:
            parts.append(f"acked {len(acks)} time(s)")
        return "; ".join(parts)

    def evidence(self, key: str, *extra: int) -> tuple[int, ...]:
        indices: set[int] = set(extra)
        times: list[float] = []
        for publish in self.publishes.get(key, []):
            indices.update(publish.indices)
            times.append(publish.invoke.time)
        for kind in ("deliver", "commit", "ack", "leftover", "dead-lettered"):
            for event in self.events_of(kind, key):
                indices.add(event.index)
                times.append(event.time)
        if times:
            indices.update(self.view.nemesis_during(min(times), max(times)))
        return tuple(sorted(indices))

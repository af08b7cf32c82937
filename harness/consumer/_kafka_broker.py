"""Kafka behind the broker port: a topic and a consumer group per run, a proxied link per process.

The harness creates the run's topic (with the partitions the target file names) and its
dead-letter topic, produces on its own direct connection (``KafkaServer.producer``: no retries,
no idempotence, so a duplicate is always the harness's choice), and reads the group's state
with the admin client.  Each consumer process reaches the broker through a link of its own
(``KafkaServer.take_link``): a listener that advertises its own Toxiproxy proxy, so cutting,
stalling or holding that proxy faults that process's every connection and no one else's
(docs/kafka-notes.md).

Kafka settles by offset, not per message: a record is settled once the group's committed
offset for its partition has passed it, and "left in the queue" is what the group has not
committed past.  A dead-letter topic keeps what was written to it, so "taking" dead letters
moves a cursor of the harness's own past them.  Kafka counts no deliveries and marks no
redelivery, so the feed's deliveries only say who holds a record (``_settling.still_held``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from harness._errors import ServiceError, UsageError
from harness._history import Event
from harness._target import render_template
from harness.consumer._broker import FEED_KINDS, Published, QueueState, Received
from harness.consumer._messages import MessageParts
from harness.consumer._settling import still_held
from harness.consumer._target import ConsumerTarget
from harness.services._kafka import KafkaLink, KafkaServer
from harness.services._kafka_client import (
    Delivered,
    KafkaAdmin,
    KafkaProducer,
    NotDelivered,
    Outgoing,
    read_topic,
)
from harness.services._network import require_loopback
from harness.services._toxiproxy import ToxiproxyProxy, ToxiproxyServer

__all__ = ["GROUP_EVENTS", "KafkaBroker"]

# A link the nemesis cuts on purpose (the losing publisher's, a consumer's) makes librdkafka log
# the lost connection; the history already says what happened.
logging.getLogger("harness.services.librdkafka").setLevel(logging.CRITICAL)

#: What a Kafka consumer's feed reports beside the common events, kept under their own names:
#: its group's rebalances and its link's state.
GROUP_EVENTS = frozenset({"assigned", "revoked", "left-group", "disconnected", "reconnected"})
#: The feed's settling events: a record's offset committed after (or before) the work, or
#: the end of a job whose offsets the client commits on a timer.  Kept as ``ack``, the
#: settling event of every broker, with the feed's own word in ``as``.
SETTLING_EVENTS = frozenset({"offset-commit", "processed"})
#: Seconds to wait for a group to lose its members before its offsets can be set (a killed
#: member stays until its session times out).
_EMPTY_GROUP_WAIT = 15.0
#: Seconds the feed's view of committed offsets may be reused (a drain looks often).
_OFFSETS_FRESH = 0.05


@dataclass(frozen=True)
class _Link:
    proxy: ToxiproxyProxy
    values: Mapping[str, str]
    link: KafkaLink
    made: bool  # the proxy was made here (not by start_kafka), and is deleted here


def _header_bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    return (value if isinstance(value, str) else json.dumps(value)).encode()


def _outgoing(message: MessageParts, partition: int | None) -> Outgoing:
    return Outgoing(message.body, key=message.key.encode() if message.key is not None else None,
                    headers=tuple((str(name), _header_bytes(value))
                                  for name, value in message.headers.items()),
                    partition=partition)


class _KafkaPublisher:
    """Produces to the run's topic with one producer; each record's outcome and place."""

    def __init__(self, producer: KafkaProducer, topic: str, partitions: int) -> None:
        self._producer = producer
        self._topic = topic
        self._partitions = partitions

    def publish(self, messages: Sequence[MessageParts], *, spread: bool = False,
                timeout: float | None = None) -> list[Published]:
        """``spread``: the copies go to the partitions in turn, so that as many members as
        there are partitions hold copies at once (one partition is read one record at a
        time)."""
        outgoing = [_outgoing(m, n % self._partitions if spread and self._partitions > 1
                              else None) for n, m in enumerate(messages)]
        try:
            outcomes = self._producer.send_all(self._topic, outgoing, wait=timeout)
        except ServiceError as exc:
            return [Published("unknown", str(exc))] * len(messages)
        return [_published(outcome) for outcome in outcomes]

    def close(self) -> None:
        with suppress(ServiceError, RuntimeError):
            self._producer.close()


def _published(outcome: Delivered | NotDelivered) -> Published:
    if isinstance(outcome, Delivered):
        return Published("confirmed", None, {"partition": outcome.partition,
                                             "offset": outcome.offset})
    return Published("unknown" if outcome.maybe else "refused", outcome.reason)


class KafkaBroker:
    """A run's topic and consumer group on ``server``; its links' proxies on ``toxiproxy``
    when ``start_kafka`` did not make them."""

    title = "Kafka"

    def __init__(self, target: ConsumerTarget, *, server: KafkaServer,
                 toxiproxy: ToxiproxyServer, run_id: str, allow_remote: bool) -> None:
        self.target = target
        self.server = server
        self.toxiproxy = toxiproxy
        self.run_id = run_id
        self.allow_remote = allow_remote
        spec = target.topic
        self.topic = str(render_template(spec.name, {"run": run_id}))
        values = {"run": run_id, "topic": self.topic}
        self.group = str(render_template(spec.group, values))
        made = spec.dead_letter_topic or target.promises.dead_letter_topic
        self.dead_topic = str(render_template(made, values)) if made else None
        promised = target.promises.dead_letter_topic
        self.dead_letters = (str(render_template(promised, values)) if promised
                             else self.dead_topic)
        self.queue = self.topic
        self.partitions = spec.partitions
        self.admin = KafkaAdmin(server.bootstrap)
        self._producer: _KafkaPublisher | None = None
        self._producer_link: _Link | None = None
        self._warm_topic = f"{self.topic}.idem-warmup"
        self._made_topics: list[str] = []
        #: How far the harness has taken each dead-letter partition (what it read is gone).
        self._taken: dict[str, dict[int, int]] = defaultdict(dict)
        self._lock = threading.Lock()
        self._committed: tuple[float, dict[int, int | None]] | None = None

    @property
    def values(self) -> Mapping[str, Any]:
        broker = self.target.broker
        values: dict[str, Any] = {
            "topic": self.topic, "group": self.group,
            "dead_letter_topic": self.dead_topic or "",
            "queue": self.topic, "dead_letter_queue": self.dead_topic or ""}
        if broker.session_timeout is not None:
            values["session_timeout_ms"] = int(broker.session_timeout * 1000)
        if broker.max_poll_interval is not None:
            values["max_poll_interval_ms"] = int(broker.max_poll_interval * 1000)
        return values

    # ---- topics and links ------------------------------------------------------------------

    def prepare(self) -> None:
        """Create the run's topic and its dead-letter topic (the consumer reads, never makes,
        them; a topic of the run's name is new)."""
        for address in self.server.bootstrap.split(","):
            require_loopback(address.strip(), allow_remote=self.allow_remote)
        self.admin.create_topic(self.topic, partitions=self.partitions)
        self._made_topics.append(self.topic)
        if self.dead_topic is not None:
            self.admin.create_topic(self.dead_topic, partitions=1)
            self._made_topics.append(self.dead_topic)

    def open_link(self, name: str) -> _Link:
        """A link of the broker's own; its proxy made by ``start_kafka`` or, failing that, here,
        listening where the broker advertises it."""
        link = self.server.take_link()
        try:
            try:
                proxy, made = self.server.proxy(link), False
            except UsageError:
                proxy = self.toxiproxy.client.create_proxy(name, link.upstream,
                                                           listen=link.listen)
                made = True
        except BaseException:
            self.server.release_link(link)
            raise
        return _Link(proxy, {"kafka_bootstrap": link.bootstrap}, link, made)

    def close_link(self, link: Any) -> None:
        assert isinstance(link, _Link)
        if link.made:
            with suppress(ServiceError):
                link.proxy.delete()
        with suppress(ServiceError):
            self.server.release_link(link.link)  # a proxy of start_kafka's is given back clean

    # ---- producing -------------------------------------------------------------------------

    def _own(self) -> _KafkaPublisher:
        if self._producer is None:
            self._producer = _KafkaPublisher(self.server.producer(), self.topic, self.partitions)
        return self._producer

    def publish(self, messages: Sequence[MessageParts], *, spread: bool = False,
                timeout: float | None = None) -> list[Published]:
        return self._own().publish(messages, spread=spread, timeout=timeout)

    def losing_publisher(self) -> tuple[ToxiproxyProxy, _KafkaPublisher]:
        """A producer through a link of its own, its connection to the partition leader made
        already (a record to a topic of the harness's own), so that when the nemesis holds
        what the broker sends back only the acknowledgement goes missing: the record is
        written, and the producer never hears so."""
        if self._producer_link is None:
            self._producer_link = self.open_link(f"idem-{self.run_id}-producer")
        if self._warm_topic not in self._made_topics:
            self.admin.create_topic(self._warm_topic, partitions=1)
            self._made_topics.append(self._warm_topic)
        producer = KafkaProducer(self._producer_link.link.bootstrap)
        try:
            producer.send(self._warm_topic, Outgoing(b"connect"))
        except BaseException:
            with suppress(ServiceError, RuntimeError):
                producer.close()
            raise
        return self._producer_link.proxy, _KafkaPublisher(producer, self.topic,
                                                          self.partitions)

    # ---- what is left ----------------------------------------------------------------------

    def _committed_offsets(self, *, fresh: bool = False) -> dict[int, int | None]:
        with self._lock:
            now = time.monotonic()
            if not fresh and self._committed is not None \
                    and now - self._committed[0] < _OFFSETS_FRESH:
                return self._committed[1]
            offsets = self.admin.committed_offsets(self.group, self.topic)
            self._committed = (now, offsets)
            return offsets

    def _lag(self) -> int:
        ends = self.admin.end_offsets_of(self.topic, self.partitions)
        committed = self._committed_offsets(fresh=True)
        return sum(max(0, end - (committed.get(p) or 0)) for p, end in ends.items())

    def _members(self) -> tuple[int, int]:
        """The members the group counts as consuming (once it is stable: during a rebalance
        none holds its partitions for sure), and every member it still lists."""
        group = self.admin.group(self.group)
        listed = len(group.members)
        return (listed if group.state == "Stable" else 0), listed

    def state(self, name: str | None = None) -> QueueState:
        """The topic: records the group has not committed past, and its members; a dead-letter
        topic: records the harness has not taken yet."""
        if name is None or name == self.topic:
            consuming, listed = self._members()
            return QueueState(True, self._lag(), consuming, listed)
        if name not in self._made_topics:
            return QueueState(False)
        ends = self.admin.end_offsets_of(name, 1)
        taken = self._taken[name]
        return QueueState(True, sum(max(0, end - taken.get(p, 0)) for p, end in ends.items()))

    def observation(self) -> dict[str, Any]:
        committed = self._committed_offsets(fresh=True)
        ends = self.admin.end_offsets_of(self.topic, self.partitions)
        return {"ready": sum(max(0, end - (committed.get(p) or 0)) for p, end in ends.items()),
                "consumers": self._members()[0],
                "committed": {str(p): o for p, o in sorted(committed.items())}}

    def take_all(self, name: str) -> list[Received]:
        """The dead letters not taken yet (the cursor moves past them); or the records of the
        topic the group has not committed past, which are then committed past (the group
        must have no members: the drain has stopped the consumers)."""
        if name != self.topic:
            if name not in self._made_topics:
                return []
            records = read_topic(self.server.bootstrap, name)
            taken = self._taken[name]
            fresh = [r for r in records if r.offset >= taken.get(r.partition, 0)]
            for record in records:
                taken[record.partition] = max(taken.get(record.partition, 0), record.offset + 1)
            return [self._received(r, f"{name}/{r.partition}/{r.offset}") for r in fresh]
        committed = self._committed_offsets(fresh=True)
        left = [r for r in read_topic(self.server.bootstrap, self.topic)
                if r.offset >= (committed.get(r.partition) or 0)]
        if left:
            ends = self.admin.end_offsets_of(self.topic, self.partitions)
            self._set_offsets(ends)
        return [self._received(r, f"{self.topic}/{r.partition}/{r.offset}") for r in left]

    @staticmethod
    def _received(record: Any, place: str) -> Received:
        headers = {name: value.decode("utf-8", "replace") for name, value in record.headers}
        key = record.key.decode("utf-8", "replace") if record.key is not None else None
        return Received(None, headers, record.value or b"", False, key, place)

    def _set_offsets(self, offsets: Mapping[int, int]) -> None:
        """Set the group's offsets, waiting (bounded) for members that are stopping or whose
        session is running out to leave it."""
        deadline = time.monotonic() + _EMPTY_GROUP_WAIT + (self.target.broker.session_timeout
                                                           or 10.0)
        while True:
            try:
                self.admin.set_offsets(self.group, self.topic, offsets)
                break
            except ServiceError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        with self._lock:
            self._committed = None

    def rewind(self, offsets: Mapping[int, int] | None = None) -> dict[int, int]:
        """Set the group's committed offsets back (default: each partition's start), once its
        members are gone: every record since is read again."""
        wanted = dict(offsets) if offsets is not None else {p: 0 for p in range(self.partitions)}
        self._set_offsets(wanted)
        return wanted

    def unsettled(self, events: Sequence[Event], confirmed: Mapping[str, int],
                  live: Iterable[tuple[str, int | None]]) -> dict[str, str]:
        """A key has settled when no live process holds one of its records unsettled and the
        group has committed past every record of it: those the broker acknowledged, and any
        other a consumer reported reading (a publish whose acknowledgement was lost)."""
        why = still_held(events, confirmed.keys(), live)
        places: dict[str, set[tuple[int, int]]] = defaultdict(set)
        for event in events:
            if event.key is None or event.key not in confirmed:
                continue
            if event.f == "publish" and event.type == "ok" and "offset" in event.value:
                places[event.key].add((int(event.value["partition"]),
                                       int(event.value["offset"])))
            elif event.f == "deliver" and event.value.get("topic") in (None, self.topic) \
                    and isinstance(event.value.get("offset"), int):
                places[event.key].add((int(event.value.get("partition") or 0),
                                       int(event.value["offset"])))
        committed = self._committed_offsets()
        for key in confirmed:
            if key in why:
                continue
            waiting = sorted((p, o) for p, o in places[key]
                             if committed.get(p) is None or o >= (committed.get(p) or 0))
            if waiting:
                p, o = waiting[0]
                why[key] = (f"group {self.group} has not committed past its record at "
                            f"partition {p}, offset {o}")
        return why

    def feed_kind(self, item: Mapping[str, Any]) -> str | None:
        kind = str(item.get("type", ""))
        if kind in SETTLING_EVENTS:
            return "ack" if item.get("key") is not None else "offset-commit"
        if kind in FEED_KINDS or kind in GROUP_EVENTS:
            return kind
        return None

    def where(self) -> str:
        return f"group {self.group!r} of topic {self.topic!r}"

    def readiness_fix(self) -> str:
        return ("check that the consumer joins the group it is given ({group}) to read the "
                "topic it is given ({topic}) from the broker at {kafka_bootstrap}")

    def close(self) -> None:
        """Close the producers, give the producer's link back, and delete what the run made
        (best effort: a group with members left cannot be deleted yet)."""
        if self._producer is not None:
            self._producer.close()
            self._producer = None
        if self._producer_link is not None:
            self.close_link(self._producer_link)
            self._producer_link = None
        for topic in self._made_topics:
            with suppress(ServiceError):
                self.admin.delete_topic(topic)
        with suppress(ServiceError):
            self.admin.delete_group(self.group)
        self.admin.close()

"""The harness's own Kafka client: confluent-kafka behind a narrow, typed face.

confluent-kafka (librdkafka) types its C extension only in part: admin calls hand back
dictionaries of futures whose results are untyped, errors come as ``KafkaException`` carrying a
``KafkaError`` in ``args[0]``, and a produce reports its outcome through a callback.  This module
is the only harness code that touches it: every call here has a timeout, returns plain frozen
dataclasses, and turns the library's errors into ``ServiceError`` (``from exc``), so a caller
never needs the library's types nor its habits.

What the harness does with Kafka is small: make and delete topics, produce with a delivery
report (``Delivered``, or ``NotDelivered`` saying whether the broker may still have it), read a
topic back from its start (a dead-letter topic), and look at a consumer group: its members, its
state, the offsets it committed, and set them back (a reset to an old offset is a fault).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from harness._errors import ServiceError

__all__ = [
    "DEFAULT_TIMEOUT",
    "Delivered",
    "GroupMember",
    "GroupState",
    "KafkaAdmin",
    "KafkaProducer",
    "NotDelivered",
    "Outgoing",
    "Record",
    "kafka_answers",
    "read_topic",
]

DEFAULT_TIMEOUT = 10.0
#: librdkafka logs every refused connection (a broker stopped, a link cut on purpose) to stderr;
#: here its lines go to this logger instead, and the harness reports failures itself.
_LIBRARY_LOG = logging.getLogger("harness.services.librdkafka")


def _config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "logger": _LIBRARY_LOG, **settings}


def _reason(exc: BaseException) -> str:
    """A KafkaException's error in words (its ``KafkaError``), or the exception itself."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        error: KafkaError = exc.args[0]
        return f"{error.name()}: {error.str()}"
    return f"{type(exc).__name__}: {exc}"


def _code(exc: BaseException) -> int | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        code: int = exc.args[0].code()
        return code
    return None


@contextmanager
def _translated(what: str, bootstrap: str) -> Iterator[None]:
    """The library's failures, and a future that never resolved, as ``ServiceError``."""
    try:
        yield
    except ServiceError:
        raise
    except (KafkaException, TimeoutError, ValueError, TypeError, RuntimeError) as exc:
        raise ServiceError(f"Kafka at {bootstrap}: {what} failed ({_reason(exc)})") from exc


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member of a consumer group, and the partitions assigned to it."""

    member_id: str
    client_id: str
    host: str
    partitions: tuple[tuple[str, int], ...]
    """``(topic, partition)`` pairs assigned to this member."""


@dataclass(frozen=True, slots=True)
class GroupState:
    """A consumer group as the broker's coordinator describes it."""

    group: str
    state: str
    """``Stable``, ``Empty``, ``PreparingRebalance``, ``CompletingRebalance``, ``Dead`` or
    ``Unknown``."""
    members: tuple[GroupMember, ...]


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message to produce: bytes as they go on the wire."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int | None = None
    """``None``: the producer's partitioner chooses (by key)."""


@dataclass(frozen=True, slots=True)
class Delivered:
    """The broker acknowledged the message: it is in the log at this place."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class NotDelivered:
    """No acknowledgement.  ``maybe`` says the broker may have written it all the same (a
    timeout, a cut connection), as an ``info`` outcome in the history; ``False`` means it
    certainly did not (the broker refused it)."""

    reason: str
    maybe: bool


@dataclass(frozen=True, slots=True)
class Record:
    """One message read back from a topic."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    def header(self, name: str) -> bytes | None:
        """The first header named ``name`` (any letter case)."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


def _headers(raw: Any) -> tuple[tuple[str, bytes], ...]:
    if not raw:
        return ()
    return tuple((str(name), value if isinstance(value, bytes) else b"" if value is None
                  else str(value).encode()) for name, value in raw)


def kafka_answers(bootstrap: str, *, timeout: float) -> str | None:
    """Why a metadata request to ``bootstrap`` fails, or None when a broker answers with itself
    in the cluster (a broker still fencing itself lists none)."""
    admin = AdminClient(_config(bootstrap, **{"socket.timeout.ms": int(timeout * 1000)}))
    try:
        metadata = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        return _reason(exc)
    if not metadata.brokers:
        return "the cluster lists no broker yet"
    return None


class KafkaAdmin:
    """Topics and consumer groups of one cluster, through its bootstrap address."""

    def __init__(self, bootstrap: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._admin = AdminClient(_config(bootstrap))
        #: A consumer that joins no group, kept to read watermarks: asked for them often (a
        #: drain looks many times a second), a new one each time would cost a connection.
        self._watermarks: Consumer | None = None
        self._watermarks_lock = threading.Lock()

    def create_topic(self, name: str, *, partitions: int = 1,
                     config: Mapping[str, str] | None = None) -> None:
        """Create ``name`` with ``partitions`` partitions and return once every partition has a
        leader (a produce right after then goes through).  An existing topic is an error: the
        harness names its topics per run, so one that exists is someone else's."""
        if partitions < 1:
            raise ValueError(f"a topic has at least one partition, not {partitions}")
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1,
                         config=dict(config or {}))
        with _translated(f"creating topic {name!r}", self.bootstrap):
            futures = self._admin.create_topics([topic], operation_timeout=self.timeout,
                                                request_timeout=self.timeout)
            futures[name].result(timeout=self.timeout + 1)
        self._wait_for_leaders(name, partitions)

    def _wait_for_leaders(self, name: str, partitions: int) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            with _translated(f"reading topic {name!r}", self.bootstrap):
                topic = self._admin.list_topics(topic=name, timeout=self.timeout).topics.get(name)
            if (topic is not None and topic.error is None and len(topic.partitions) == partitions
                    and all(p.leader >= 0 for p in topic.partitions.values())):
                return
            if time.monotonic() > deadline:
                raise ServiceError(f"Kafka at {self.bootstrap}: topic {name!r} has no leader for "
                                   f"each of its {partitions} partitions after {self.timeout:g} s")
            time.sleep(0.05)

    def delete_topic(self, name: str) -> None:
        """Delete ``name``; a topic that does not exist is already deleted."""
        try:
            with _translated(f"deleting topic {name!r}", self.bootstrap):
                futures = self._admin.delete_topics([name], operation_timeout=self.timeout,
                                                    request_timeout=self.timeout)
                futures[name].result(timeout=self.timeout + 1)
        except ServiceError as exc:
            if _code(exc.__cause__ or exc) != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise

    def topics(self) -> set[str]:
        """Every topic's name, the broker's internal ones left out."""
        with _translated("listing topics", self.bootstrap):
            names = self._admin.list_topics(timeout=self.timeout).topics
        return {name for name in names if not name.startswith("__")}

    def partitions(self, topic: str) -> int:
        with _translated(f"reading topic {topic!r}", self.bootstrap):
            found = self._admin.list_topics(topic=topic, timeout=self.timeout).topics.get(topic)
        if found is None or found.error is not None:
            raise ServiceError(f"Kafka at {self.bootstrap}: no topic {topic!r}")
        return len(found.partitions)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """Each partition's high watermark: the offset the next message will get."""
        return self.end_offsets_of(topic, self.partitions(topic))

    def end_offsets_of(self, topic: str, partitions: int) -> dict[int, int]:
        """``end_offsets`` for a topic whose partitions are known (one request fewer)."""
        with self._watermarks_lock:
            if self._watermarks is None:
                self._watermarks = Consumer(_config(self.bootstrap, **{
                    "group.id": _scratch_group(), "enable.auto.commit": False}))
            consumer = self._watermarks
            with _translated(f"reading the end offsets of {topic!r}", self.bootstrap):
                return {partition: consumer.get_watermark_offsets(
                            TopicPartition(topic, partition), timeout=self.timeout)[1]
                        for partition in range(partitions)}

    def close(self) -> None:
        """Close the consumer kept for watermarks (the admin client needs no closing)."""
        with self._watermarks_lock:
            if self._watermarks is not None:
                self._watermarks.close()
                self._watermarks = None

    def committed_offsets(self, group: str, topic: str) -> dict[int, int | None]:
        """The offset ``group`` committed for each partition of ``topic`` (the next message it
        will read), ``None`` where it committed none."""
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, p) for p in range(self.partitions(topic))])
        with _translated(f"reading group {group!r}'s offsets", self.bootstrap):
            futures = self._admin.list_consumer_group_offsets([request],
                                                              request_timeout=self.timeout)
            answer = futures[group].result(timeout=self.timeout + 1)
        return {tp.partition: None if tp.offset == OFFSET_INVALID else tp.offset
                for tp in answer.topic_partitions if tp.topic == topic}

    def set_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Set ``group``'s committed offsets for ``topic`` (partition to offset): where its next
        member starts reading.  The broker refuses while the group has members."""
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(topic, partition, offset)
                    for partition, offset in sorted(offsets.items())])
        with _translated(f"setting group {group!r}'s offsets", self.bootstrap):
            futures = self._admin.alter_consumer_group_offsets([request],
                                                               request_timeout=self.timeout)
            answer = futures[group].result(timeout=self.timeout + 1)
        refused = [f"partition {tp.partition}: {tp.error}" for tp in answer.topic_partitions
                   if tp.error is not None]
        if refused:
            raise ServiceError(f"Kafka at {self.bootstrap}: group {group!r} kept its offsets "
                               f"({'; '.join(refused)}); stop its members first")

    def group(self, group: str) -> GroupState:
        """The group's state and members (``Dead`` with no members: no such group)."""
        with _translated(f"describing group {group!r}", self.bootstrap):
            futures = self._admin.describe_consumer_groups([group], request_timeout=self.timeout)
            description = futures[group].result(timeout=self.timeout + 1)
        members = tuple(
            GroupMember(
                member_id=str(member.member_id), client_id=str(member.client_id),
                host=str(member.host),
                partitions=tuple(sorted((tp.topic, tp.partition)
                                        for tp in member.assignment.topic_partitions)))
            for member in description.members)
        state = getattr(description.state, "name", str(description.state))
        return GroupState(group, _state_name(state), members)

    def delete_group(self, group: str) -> None:
        """Forget ``group`` and its offsets (it must have no members)."""
        with _translated(f"deleting group {group!r}", self.bootstrap):
            futures = self._admin.delete_consumer_groups([group], request_timeout=self.timeout)
            futures[group].result(timeout=self.timeout + 1)


def _state_name(raw: str) -> str:
    """``PREPARING_REBALANCING`` as the broker's own word, ``PreparingRebalance``."""
    known = {"STABLE": "Stable", "EMPTY": "Empty", "DEAD": "Dead",
             "PREPARING_REBALANCING": "PreparingRebalance",
             "COMPLETING_REBALANCING": "CompletingRebalance", "UNKNOWN": "Unknown",
             "ASSIGNING": "Assigning", "RECONCILING": "Reconciling"}
    return known.get(raw.upper(), raw)


def _scratch_group() -> str:
    """A group id nobody joins: reading offsets with a consumer needs one, committing nothing."""
    return f"idem-harness-look-{uuid.uuid4().hex[:12]}"


class KafkaProducer:
    """The harness's producer: every message it sends gets a delivery report.

    Not idempotent and with no retries of its own, on purpose: the harness decides when a
    message goes twice (a producer retry is a fault it injects), and a send the broker never
    acknowledged must come back as ``NotDelivered(maybe=True)``, not be resent behind its back.
    """

    def __init__(self, bootstrap: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._producer = Producer(_config(bootstrap, **{
            "acks": "all", "enable.idempotence": False, "retries": 0, "linger.ms": 0,
            "message.timeout.ms": int(timeout * 1000)}))

    def send(self, topic: str, message: Outgoing) -> Delivered:
        """Produce one message and wait for its acknowledgement; ``ServiceError`` without one."""
        outcome = self.send_all(topic, [message])[0]
        if isinstance(outcome, NotDelivered):
            raise ServiceError(f"Kafka at {self.bootstrap}: a message to {topic!r} was not "
                               f"acknowledged ({outcome.reason})")
        return outcome

    def send_all(self, topic: str, messages: Sequence[Outgoing], *, wait: float | None = None
                 ) -> list[Delivered | NotDelivered]:
        """Produce every message before waiting for any acknowledgement (copies meant to arrive
        together do), then each one's outcome, in order.  ``wait``: seconds to wait for the
        acknowledgements (default: the producer's timeout); one not in by then is
        ``NotDelivered(maybe=True)``, as a producer that gives up on it sees it."""
        outcomes: list[Delivered | NotDelivered | None] = [None] * len(messages)

        def report(index: int) -> Any:
            def delivered(error: KafkaError | None, message: Any) -> None:
                if error is None:
                    outcomes[index] = Delivered(str(message.topic()), int(message.partition()),
                                                int(message.offset()))
                else:
                    refused = not error.retriable() and error.code() not in (
                        KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT,
                        KafkaError._TRANSPORT, KafkaError.REQUEST_TIMED_OUT)
                    outcomes[index] = NotDelivered(f"{error.name()}: {error.str()}",
                                                   maybe=not refused)
            return delivered

        with _translated(f"producing to {topic!r}", self.bootstrap):
            for index, message in enumerate(messages):
                extra: dict[str, Any] = {}
                if message.partition is not None:
                    extra["partition"] = message.partition
                self._producer.produce(topic, value=message.value, key=message.key,
                                       headers=list(message.headers), on_delivery=report(index),
                                       **extra)
            self._producer.flush(self.timeout + 1 if wait is None else wait)
        return [outcome if outcome is not None
                else NotDelivered("no delivery report in time", maybe=True)
                for outcome in outcomes]

    def close(self) -> None:
        """Send what is queued (for a second at most) and close the connections."""
        self._producer.flush(1.0)
        self._producer.close()

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_topic(bootstrap: str, topic: str, *, timeout: float = DEFAULT_TIMEOUT) -> list[Record]:
    """Every message in ``topic`` now, from each partition's start to its end, in partition and
    offset order.  Joins no group and commits nothing."""
    admin = KafkaAdmin(bootstrap, timeout=timeout)
    ends = {p: end for p, end in admin.end_offsets(topic).items() if end > 0}
    if not ends:
        return []
    consumer = Consumer(_config(bootstrap, **{"group.id": _scratch_group(),
                                              "enable.auto.commit": False,
                                              "enable.partition.eof": True}))
    records: list[Record] = []
    try:
        with _translated(f"reading topic {topic!r}", bootstrap):
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
            pending = set(ends)
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                message = consumer.poll(0.2)
                if message is None:
                    continue
                error = message.error()
                partition = message.partition()
                if partition is None:
                    continue
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(partition)
                        continue
                    raise KafkaException(error)
                offset = message.offset() or 0
                if offset < ends.get(partition, 0):
                    records.append(Record(topic, partition, offset, message.key(),
                                          message.value(), _headers(message.headers())))
                if offset + 1 >= ends.get(partition, 0):
                    pending.discard(partition)
            if pending:
                raise ServiceError(f"Kafka at {bootstrap}: topic {topic!r} was not read to its "
                                   f"end within {timeout:g} s (partitions {sorted(pending)})")
    finally:
        consumer.close()
    return sorted(records, key=lambda record: (record.partition, record.offset))

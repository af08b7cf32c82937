"""The consumer's side of Kafka: a member of a consumer group, reading one topic a record at a
time, committing each record's offset after its work.

The worker (``_worker``) is the RabbitMQ consumer's own: this adapter only turns Kafka's ways
into the worker's ``Delivery`` and ``Settlement``:

- **ack** is a synchronous commit of the record's offset + 1, made after the work committed
  (the event ``offset-commit``).  A commit the group refuses (the member was dropped: killed,
  cut off, or kept past ``max.poll.interval.ms`` while its partition went to another member)
  returns False (``ack-lost``): the record will be read again from the last committed offset.
  With the ``auto-commit-before-work`` flaw there is no commit of the consumer's own: the client
  commits what ``poll`` returned on a timer (events ``offset-commit`` with ``auto``), and the
  end of the work is reported as ``processed``.
- **requeue** (failing work) seeks the partition back to the record, so the next poll reads it
  again; Kafka has no nack.  The adapter counts the deliveries of each offset in this process
  (``delivery_count``), which is what bounds the attempts; Kafka itself counts nothing, so after
  a restart or a rebalance a record starts again from 0 (and a test hook applies again).
- **dead-letter** produces the record, with its key and headers and ``x-dead-letter-reason``,
  ``x-original-topic``, ``x-original-partition``, ``x-original-offset``, to the dead-letter topic
  (made by the consumer when absent, one partition), waits for the broker's acknowledgement,
  then commits past the record.

Records are handled one after another, in the order of the log: the next poll waits for the
worker.  A job that pauses longer than ``max.poll.interval.ms`` therefore stops the polling, and
librdkafka leaves the group on the member's behalf: the classic zombie, still working on a
record whose partition another member now reads.  Heartbeats run on librdkafka's own thread, so
a pause alone never ends the session; a kill or a cut link does, after ``session.timeout.ms``.

confluent-kafka's consumer blocks; every call to it runs on one thread of its own
(``_call``), and its callbacks (rebalances, commits, errors), which it serves inside ``poll``,
hand their events to the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from reference_server.consumer._broker import BrokerUnreachable
from reference_server.consumer._events import EventLog
from reference_server.consumer._messages import Delivery
from reference_server.consumer._settings import ConsumerSettings

__all__ = ["KafkaSettlement", "TopicConsumer", "delivery_of"]

logger = logging.getLogger(__name__)
_library_log = logging.getLogger("reference_server.consumer.librdkafka")

T = TypeVar("T")
Handler = Callable[[Delivery, "KafkaSettlement"], Coroutine[Any, Any, None]]
Position = tuple[str, int, int]

_POLL = 0.2
_DOWN = {KafkaError._ALL_BROKERS_DOWN, KafkaError._TRANSPORT}


def _reason(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return f"{exc.args[0].name()}: {exc.args[0].str()}"
    return f"{type(exc).__name__}: {exc}"


def delivery_of(message: Message, delivery_count: int) -> Delivery:
    """The worker's view of a record: its place in the log stands in for a message id."""
    topic, partition, offset = message.topic() or "", message.partition(), message.offset()
    listed: Any = message.headers() or []  # pairs: a record may repeat a name
    raw = tuple((str(name), value) for name, value in listed)
    headers: dict[str, Any] = {}
    for name, value in raw:
        headers.setdefault(name, value)
    return Delivery(
        body=message.value() or b"",
        headers=headers,
        message_id=f"{topic}/{partition}/{offset}",
        redelivered=delivery_count > 0,
        delivery_count=delivery_count,
        key=message.key(),
        raw_headers=raw,
        event_fields={"topic": topic, "partition": partition, "offset": offset},
    )


class KafkaSettlement:
    """Commit past one record, read it again, or dead-letter it."""

    def __init__(self, member: TopicConsumer, message: Message) -> None:
        self._member = member
        self._message = message

    @property
    def ack_event(self) -> str:
        return "processed" if self._member.auto_commit else "offset-commit"

    @property
    def open(self) -> bool:
        return not self._member.closing

    async def ack(self) -> bool:
        if self._member.auto_commit:
            return True  # the client's timer commits, whatever happened
        return await self._member.commit_past(self._message)

    async def requeue(self) -> bool:
        await self._member.seek_back(self._message)
        return True

    async def dead_letter(self, reason: str = "") -> bool:
        if not await self._member.to_dead_letters(self._message, reason):
            return False
        if self._member.auto_commit:
            return True
        return await self._member.commit_past(self._message)


class TopicConsumer:
    """Reads ``settings.queue`` (a topic) in group ``settings.group`` and hands each record to
    ``handler``, one at a time."""

    def __init__(self, settings: ConsumerSettings, handler: Handler, events: EventLog, *,
                 auto_commit: bool = False) -> None:
        self._settings = settings
        self._handler = handler
        self._events = events
        self.auto_commit = auto_commit
        self.closing = False
        self._down = False
        self._assigned: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kafka")
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._polling: asyncio.Task[None] | None = None
        self._working = False
        self._deliveries: dict[Position, int] = {}

    @property
    def connected(self) -> bool:
        return self._consumer is not None and not self._down

    @property
    def in_flight(self) -> int:
        return int(self._working)

    async def _call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking client call on the client's own thread."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, lambda: function(*args, **kwargs))

    def _record(self, type_: str, **fields: Any) -> None:
        """An event from a client callback (on the client's thread), for the event loop."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(lambda: self._events.record(type_, **fields))

    # -- start -------------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        settings = self._settings
        session_ms = int(settings.session_timeout * 1000)
        return {
            "bootstrap.servers": settings.bootstrap,
            "group.id": settings.group,
            "client.id": f"reference-consumer-{os.getpid()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": self.auto_commit,
            "auto.commit.interval.ms": max(1, int(settings.auto_commit_interval * 1000)),
            "enable.auto.offset.store": True,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": max(100, min(3000, session_ms // 3)),
            "max.poll.interval.ms": int(settings.max_poll_interval * 1000),
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
            "logger": _library_log,
            "error_cb": self._on_error,
            "on_commit": self._on_commit,
        }

    async def start(self, *, connect_timeout: float) -> None:
        """Connect (retrying until ``connect_timeout``), make the dead-letter topic when absent,
        join the group, and return once the group has given this member its partitions."""
        self._loop = asyncio.get_running_loop()
        self._assigned = asyncio.Event()
        settings = self._settings
        self._consumer = await self._call(Consumer, self._config())
        await self._topics_exist(connect_timeout)
        self._producer = await self._call(Producer, {
            "bootstrap.servers": settings.bootstrap, "acks": "all", "linger.ms": 0,
            "logger": _library_log})
        await self._call(self._consumer.subscribe, [settings.queue],
                         on_assign=self._on_assign, on_revoke=self._on_revoke,
                         on_lost=self._on_lost)
        self._polling = asyncio.create_task(self._poll_forever(), name="kafka-poll")
        try:
            await asyncio.wait_for(self._assigned.wait(), connect_timeout)
        except TimeoutError:
            await self.close(grace=0.5)
            raise BrokerUnreachable(
                f"gave group {settings.group!r} no partitions of {settings.queue!r} within "
                f"{connect_timeout:g} s", "check that the broker's group coordinator works "
                "(offsets.topic.replication.factor must not exceed its brokers)") from None

    async def _topics_exist(self, connect_timeout: float) -> None:
        settings = self._settings
        assert self._consumer is not None
        deadline = asyncio.get_running_loop().time() + connect_timeout
        while True:
            try:
                metadata = await self._call(self._consumer.list_topics, timeout=2.0)
                break
            except KafkaException as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise BrokerUnreachable(f"cannot be reached: {_reason(exc)}",
                                            "check --bootstrap, and that Kafka is running") from exc
        if settings.queue not in metadata.topics:
            raise BrokerUnreachable(
                f"has no topic {settings.queue!r}",
                "create it first, with the partitions you mean (the broker may not create "
                "topics by itself; the harness creates its own)")
        if settings.dead_letters not in metadata.topics:
            admin = AdminClient({"bootstrap.servers": settings.bootstrap, "log_level": 3})
            futures = admin.create_topics([NewTopic(settings.dead_letters, num_partitions=1)],
                                          operation_timeout=10, request_timeout=10)
            try:
                await asyncio.wrap_future(futures[settings.dead_letters])
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # another member's
                    raise BrokerUnreachable(
                        f"refused the dead-letter topic {settings.dead_letters!r}: "
                        f"{_reason(exc)}", "create it, or name another with "
                        "--dead-letter-topic") from exc

    # -- client callbacks (on the client's thread, inside poll) -------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("assigned", partitions=sorted(p.partition for p in partitions),
                     topic=self._settings.queue)
        if self._assigned is not None and self._loop is not None:
            self._loop.call_soon_threadsafe(self._assigned.set)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("revoked", partitions=sorted(p.partition for p in partitions),
                     topic=self._settings.queue)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._record("revoked", partitions=sorted(p.partition for p in partitions),
                     topic=self._settings.queue, lost=True)

    def _on_error(self, error: KafkaError) -> None:
        if error.code() in _DOWN and not self._down:
            self._down = True
            logger.warning("lost the broker connection (%s)", error.str())
            self._record("disconnected", reason=f"{error.name()}: {error.str()}")

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        if not self.auto_commit:
            return  # the worker reports its own commits
        for partition in partitions:
            if partition.error is None and partition.offset >= 0:
                self._record("offset-commit", topic=partition.topic,
                             partition=partition.partition, offset=partition.offset,
                             outcome="auto")

    # -- the loop ----------------------------------------------------------------------------

    async def _poll_forever(self) -> None:
        assert self._consumer is not None
        while not self.closing:
            try:
                message = await self._call(self._consumer.poll, _POLL)
            except RuntimeError:  # the consumer was closed under the poll
                return
            if message is None:
                continue
            error = message.error()
            if error is not None:
                self._polled_error(error)
                continue
            if self._down:
                self._down = False
                self._events.record("reconnected", topic=self._settings.queue)
            position = (message.topic() or "", message.partition() or 0, message.offset() or 0)
            earlier = self._deliveries.get(position, 0)
            self._deliveries[position] = earlier + 1
            self._working = True
            try:
                await self._handler(delivery_of(message, earlier),
                                    KafkaSettlement(self, message))
            except Exception:  # the worker never raises for a record; a bug must not stop us
                logger.exception("handling the record at %s failed", position)
            finally:
                self._working = False

    def _polled_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.code() == KafkaError._MAX_POLL_EXCEEDED:
            logger.warning("the job outlived max.poll.interval.ms: this member left its group")
            self._events.record("left-group", reason=f"{error.name()}: {error.str()}")
            return
        logger.warning("the consumer reported %s: %s", error.name(), error.str())

    # -- settling ----------------------------------------------------------------------------

    async def commit_past(self, message: Message) -> bool:
        """Commit the record's offset + 1; False when the group refused it."""
        assert self._consumer is not None
        topic, partition, offset = message.topic(), message.partition(), message.offset() or 0
        target = TopicPartition(topic or "", partition or 0, offset + 1)
        consumer = self._consumer
        try:
            answer = await self._call(
                lambda: consumer.commit(offsets=[target], asynchronous=False))
        except (KafkaException, RuntimeError) as exc:
            logger.info("the offset commit failed: %s", _reason(exc))
            return False
        refused = [p for p in answer or [] if p.error is not None]
        if refused:
            logger.info("the offset commit was refused: %s", refused[0].error)
            return False
        for position in [p for p in self._deliveries if p[:2] == (topic, partition)
                         and p[2] <= offset]:
            del self._deliveries[position]
        return True

    async def seek_back(self, message: Message) -> None:
        """The next poll reads this record again."""
        assert self._consumer is not None
        target = TopicPartition(message.topic() or "", message.partition() or 0,
                                message.offset() or 0)
        try:
            await self._call(self._consumer.seek, target)
        except KafkaException as exc:  # the partition was taken away: its next owner reads it
            logger.info("could not seek back: %s", _reason(exc))

    async def to_dead_letters(self, message: Message, reason: str) -> bool:
        """Produce the record to the dead-letter topic and wait for the broker's word."""
        assert self._producer is not None
        outcome: asyncio.Future[KafkaError | None] = asyncio.get_running_loop().create_future()
        loop = asyncio.get_running_loop()

        def settle(error: KafkaError | None) -> None:
            if not outcome.done():
                outcome.set_result(error)

        def delivered(error: KafkaError | None, _: Message) -> None:
            loop.call_soon_threadsafe(settle, error)

        headers = [*(message.headers() or []),
                   ("x-dead-letter-reason", reason.encode()),
                   ("x-original-topic", (message.topic() or "").encode()),
                   ("x-original-partition", str(message.partition()).encode()),
                   ("x-original-offset", str(message.offset()).encode())]
        producer = self._producer
        await self._call(producer.produce, self._settings.dead_letters, value=message.value(),
                         key=message.key(), headers=headers, on_delivery=delivered)
        await self._call(producer.flush, 10.0)
        if not outcome.done():
            logger.warning("the dead-letter topic did not acknowledge a record in 10 s")
            return False
        error = outcome.result()
        if error is not None:
            logger.warning("the dead-letter topic refused a record: %s", error.str())
            return False
        return True

    # -- stop --------------------------------------------------------------------------------

    async def close(self, *, grace: float = 2.0) -> None:
        """Let the running job finish for ``grace`` seconds, then drop it (its record is read
        again by whoever holds the partition next) and leave the group."""
        self.closing = True
        if self._polling is not None:
            done, _ = await asyncio.wait({self._polling}, timeout=grace)
            if not done:
                self._polling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._polling
            self._polling = None
        if self._consumer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                await asyncio.wait_for(self._call(self._consumer.close), grace + 3)
            self._consumer = None
        if self._producer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                await self._call(self._producer.flush, 1.0)
            self._producer = None
        self._thread.shutdown(wait=False, cancel_futures=True)

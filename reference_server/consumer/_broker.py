"""The consumer's side of RabbitMQ: connect, declare, consume, and answer each delivery.

aio-pika's robust connection reconnects after a cut (the harness cuts it through Toxiproxy) and
restores the channel, its prefetch, the queues and the consumer.  A delivery whose channel died
can no longer be acked: ``AmqpSettlement`` says so (False) instead of raising, and the broker
delivers the message again, which the dedup key makes harmless.

Queues are quorum queues, because only they count deliveries (``x-delivery-count``), which is
how a message that kills every consumer it reaches is recognised; the main queue dead-letters
through the default exchange into the dead-letter queue.  Both are declared here, durable, so
the consumer needs nothing set up in advance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import aio_pika
import aiormq
from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from reference_server.consumer._events import EventLog
from reference_server.consumer._messages import Delivery
from reference_server.consumer._settings import ConsumerSettings

__all__ = ["AmqpSettlement", "BrokerUnreachable", "QueueConsumer", "delivery_of"]

logger = logging.getLogger(__name__)

RECONNECT_INTERVAL = 0.5  # after a cut: the harness waits for the redelivery, keep it short

#: What a dying channel or connection raises from an ack; all mean "not settled".
_GONE = (aio_pika.exceptions.AMQPException, aiormq.exceptions.AMQPError, ConnectionError,
         asyncio.TimeoutError, RuntimeError)


class BrokerUnreachable(Exception):
    """The broker did not accept the connection or the queue declarations; ``fix`` says what
    to check."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.fix = fix


def delivery_of(message: AbstractIncomingMessage) -> Delivery:
    headers: dict[str, Any] = dict(message.headers or {})
    count = headers.get("x-delivery-count", 0)
    return Delivery(
        body=message.body,
        headers=headers,
        message_id=message.message_id,
        redelivered=bool(message.redelivered),
        delivery_count=count if isinstance(count, int) and count >= 0 else 0,
    )


class AmqpSettlement:
    """Ack, requeue or dead-letter one delivery, at most once, on the channel it came on."""

    ack_event = "ack"

    def __init__(self, message: AbstractIncomingMessage) -> None:
        self._message = message

    @property
    def open(self) -> bool:
        if self._message.processed:
            return False
        try:
            return not self._message.channel.is_closed
        except aiormq.exceptions.ChannelInvalidStateError:  # the channel is already gone
            return False

    async def _settle(self, action: Callable[[], Awaitable[None]]) -> bool:
        if not self.open:
            return False
        try:
            await action()
        except _GONE as exc:
            logger.info("could not settle a delivery: %s", exc)
            return False
        return True

    async def ack(self) -> bool:
        return await self._settle(self._message.ack)

    async def requeue(self) -> bool:
        return await self._settle(lambda: self._message.nack(requeue=True))

    async def dead_letter(self, reason: str = "") -> bool:
        """The broker adds ``x-death``; AMQP carries no reason of ours."""
        return await self._settle(lambda: self._message.reject(requeue=False))


Handler = Callable[[Delivery, AmqpSettlement], Coroutine[Any, Any, None]]


class QueueConsumer:
    """Consumes ``settings.queue`` and hands each delivery to ``handler`` in a task of its own
    (up to ``prefetch`` at once)."""

    def __init__(self, settings: ConsumerSettings, handler: Handler, events: EventLog) -> None:
        self._settings = settings
        self._handler = handler
        self._events = events
        self._connection: AbstractRobustConnection | None = None
        self._consuming: tuple[AbstractQueue, str] | None = None
        self._down = False
        self._closing = False
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def connected(self) -> bool:
        """Connected now: a robust connection that is reconnecting is not closed, but down."""
        return (self._connection is not None and not self._connection.is_closed
                and not self._down)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def start(self, *, connect_timeout: float) -> None:
        """Connect (retrying until ``connect_timeout``), declare both queues and consume."""
        settings = self._settings
        deadline = asyncio.get_running_loop().time() + connect_timeout
        while True:
            try:
                self._connection = await aio_pika.connect_robust(
                    settings.amqp_url, timeout=5, heartbeat=max(1, round(settings.heartbeat)),
                    reconnect_interval=RECONNECT_INTERVAL,
                    client_properties={"connection_name": f"reference-consumer {settings.queue}"},
                )
                break
            except (*_GONE, OSError) as exc:
                if asyncio.get_running_loop().time() > deadline:
                    raise BrokerUnreachable(f"cannot be reached: {type(exc).__name__}: {exc}",
                                            "check --amqp-url, and that RabbitMQ is running "
                                            "and accepts this user") from exc
                await asyncio.sleep(0.25)
        self._connection.close_callbacks.add(self._on_close)
        self._connection.reconnect_callbacks.add(self._on_reconnect)
        try:
            channel = await self._connection.channel()
            await channel.set_qos(prefetch_count=settings.prefetch)
            await channel.declare_queue(settings.dead_letters, durable=True,
                                        arguments={"x-queue-type": "quorum"})
            queue = await channel.declare_queue(settings.queue, durable=True, arguments={
                "x-queue-type": "quorum",
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": settings.dead_letters,
            })
            self._consuming = (queue, await queue.consume(self._on_message))
        except _GONE as exc:
            await self.close()
            raise BrokerUnreachable(
                f"refused the queues: {exc}",
                f"a queue named {settings.queue} or {settings.dead_letters} exists with other "
                "arguments (the consumer declares durable quorum queues): delete it, or use "
                "other names") from exc

    def _on_close(self, sender: object, exc: BaseException | None = None) -> None:
        """Called for the lost connection and again for each failed attempt to reconnect:
        said once."""
        if exc is not None and not self._down and not self._closing:
            self._down = True
            logger.warning("lost the broker connection (%s); reconnecting", exc)
            self._events.record("disconnected", reason=f"{type(exc).__name__}: {exc}")

    def _on_reconnect(self, sender: object) -> None:
        self._down = False
        logger.info("reconnected to the broker")
        self._events.record("reconnected", queue=self._settings.queue)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.create_task(self._handler(delivery_of(message), AmqpSettlement(message)))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("a delivery's handler failed", exc_info=exc)

    async def close(self, *, grace: float = 2.0) -> None:
        """Let running handlers finish for ``grace`` seconds, then drop them (their messages go
        back to the queue when the connection closes) and close."""
        self._closing = True
        if self._consuming is not None:  # no new deliveries while the running ones finish
            queue, tag = self._consuming
            self._consuming = None
            if self.connected:
                with contextlib.suppress(*_GONE):
                    await asyncio.wait_for(queue.cancel(tag), grace)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for task in list(self._tasks):
            task.cancel()
        if self._connection is not None:
            # A connection that is down or stalled must not hold the exit.
            with contextlib.suppress(*_GONE):
                await asyncio.wait_for(self._connection.close(),
                                       grace if self.connected else 0.2)
            self._connection = None

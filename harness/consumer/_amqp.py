"""The harness's own AMQP connection: it publishes with publisher confirms and inspects queues.

aio-pika is asynchronous and the harness's scenarios are threads, so one event loop runs in a
thread of its own and every call waits for its coroutine with a deadline.  Outcomes follow the
history's rule: a publish is ``confirmed`` (the broker has it), ``refused`` (a nack, or returned
as unroutable: certainly not queued) or ``unknown`` (no confirm in time: it may be queued).
Errors of the client library become ``ServiceError`` here, at the boundary.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection, DeliveryMode
from aio_pika.exceptions import AMQPError, ChannelNotFoundEntity, DeliveryError

from harness._errors import ServiceError
from harness.consumer._broker import PublishOutcome, QueueState, Received

__all__ = ["AmqpClient", "Outgoing", "PublishOutcome", "QueueState", "Received"]

T = TypeVar("T")
# A connection the nemesis cuts on purpose (the producer's, after a lost confirm) makes aiormq
# log the reader's death with a traceback; the history already says what happened.
logging.getLogger("aiormq").setLevel(logging.CRITICAL)
logging.getLogger("aio_pika").setLevel(logging.CRITICAL)

@dataclass(frozen=True, slots=True)
class Outgoing:
    """One message the harness publishes (persistent and mandatory: a message no queue takes
    is returned, not dropped)."""

    exchange: str
    routing_key: str
    body: bytes
    message_id: str | None
    headers: Mapping[str, Any]
    content_type: str
    #: Other AMQP basic properties (``correlation_id``, ``type``...); ``expiration`` is in
    #: milliseconds, as AMQP has it.
    properties: Mapping[str, Any] = field(default_factory=dict)


class _Loop:
    """An asyncio loop in a daemon thread; ``call`` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="amqp", daemon=True)
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout)

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


class AmqpClient:
    """One connection to the broker, for publishing (confirmed) and for looking at queues."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url
        self._timeout = timeout
        self._loop = _Loop()
        self._connection: AbstractConnection | None = None
        self._channel: AbstractChannel | None = None
        self._lock = threading.Lock()

    def _run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        try:
            return self._loop.call(coroutine, (timeout or self._timeout) + 2)
        except (AMQPError, OSError, ConnectionError) as exc:
            raise ServiceError(f"the broker at {_shown(self.url)} failed: "
                               f"{type(exc).__name__}: {exc}") from exc

    async def _open(self) -> AbstractChannel:
        if self._connection is None or self._connection.is_closed:
            self._connection = await aio_pika.connect(self.url, timeout=self._timeout)
            self._channel = None
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._connection.channel(publisher_confirms=True,
                                                           on_return_raises=True)
        return self._channel

    def publish(self, message: Outgoing, *,
                timeout: float | None = None) -> tuple[PublishOutcome, str | None]:
        """Publish one persistent, mandatory message and wait for the broker's confirm; the
        outcome and, when not confirmed, why."""
        return self.publish_at_once([message], timeout=timeout)[0]

    def publish_at_once(self, messages: Sequence[Outgoing], *, timeout: float | None = None
                        ) -> list[tuple[PublishOutcome, str | None]]:
        """Publish every message before waiting for any confirm, then wait for them all; each
        message's outcome in order.  The broker confirms a persistent message only once it is
        on disk, which a busy machine can make take tens of milliseconds: published one after
        another, copies meant to arrive together would arrive that far apart."""
        wait = timeout or self._timeout

        async def send(channel: AbstractChannel,
                       outgoing: Outgoing) -> tuple[PublishOutcome, str | None]:
            target = (channel.default_exchange if not outgoing.exchange
                      else await channel.get_exchange(outgoing.exchange, ensure=False))
            extra = dict(outgoing.properties)
            if "expiration" in extra:
                extra["expiration"] = float(extra["expiration"]) / 1000
            message = aio_pika.Message(outgoing.body, headers=dict(outgoing.headers),
                                       message_id=outgoing.message_id,
                                       content_type=outgoing.content_type,
                                       delivery_mode=DeliveryMode.PERSISTENT, **extra)
            try:
                await target.publish(message, outgoing.routing_key, mandatory=True,
                                     timeout=wait)
            except DeliveryError as exc:
                frame = type(exc.frame).__name__ if exc.frame is not None else "nack"
                return "refused", ("returned unroutable: no queue is bound to "
                                   f"{outgoing.routing_key!r}" if frame == "Return"
                                   else "nacked")
            except TimeoutError:
                return "unknown", f"no confirm within {wait:g} s"
            except (AMQPError, OSError, ConnectionError) as exc:
                self._channel = None
                return "unknown", f"{type(exc).__name__}: {exc}"
            return "confirmed", None

        async def send_all() -> list[tuple[PublishOutcome, str | None]]:
            channel = await self._open()
            return list(await asyncio.gather(*(send(channel, m) for m in messages)))

        with self._lock:
            try:
                return self._loop.call(send_all(), wait + 5)
            except TimeoutError:
                return [("unknown", f"no confirm within {wait:g} s")] * len(messages)
            except (AMQPError, OSError, ConnectionError) as exc:
                self._channel = None
                return [("unknown", f"{type(exc).__name__}: {exc}")] * len(messages)

    def queue_state(self, name: str) -> QueueState:
        """A passive declare on a channel of its own (a missing queue closes the channel)."""

        async def look() -> QueueState:
            await self._open()
            assert self._connection is not None
            channel = await self._connection.channel()
            try:
                queue = await channel.declare_queue(name, passive=True)
            except ChannelNotFoundEntity:
                return QueueState(False)
            result = queue.declaration_result
            await channel.close()
            return QueueState(True, int(result.message_count or 0),
                              int(result.consumer_count or 0))

        with self._lock:
            return self._run(look())

    def take_all(self, name: str, *, limit: int = 1000) -> list[Received]:
        """Take every ready message off queue ``name`` (acked: removed), at most ``limit``."""

        async def drain() -> list[Received]:
            await self._open()
            assert self._connection is not None
            channel = await self._connection.channel()
            taken: list[Received] = []
            try:
                queue = await channel.declare_queue(name, passive=True)
            except ChannelNotFoundEntity:
                return taken
            while len(taken) < limit:
                message = await queue.get(no_ack=True, fail=False, timeout=self._timeout)
                if message is None:
                    break
                taken.append(Received(message.message_id, dict(message.headers or {}),
                                      message.body, bool(message.redelivered)))
            await channel.close()
            return taken

        with self._lock:
            return self._run(drain())

    def purge(self, name: str) -> None:
        async def purge() -> None:
            await self._open()
            assert self._connection is not None
            channel = await self._connection.channel()
            try:
                queue = await channel.declare_queue(name, passive=True)
            except ChannelNotFoundEntity:
                return
            await queue.purge()
            await channel.close()

        with self._lock:
            self._run(purge())

    def close(self) -> None:
        async def close() -> None:
            if self._connection is not None and not self._connection.is_closed:
                await self._connection.close()

        with suppress(Exception):  # closing a connection the nemesis broke: nothing to do
            self._loop.call(close(), 5)
        self._loop.close()


def _shown(url: str) -> str:
    """The URL without its password, for messages."""
    scheme, _, rest = url.partition("://")
    credentials, at, place = rest.rpartition("@")
    user = credentials.split(":", 1)[0]
    return f"{scheme}://{user + '@' if at else ''}{place}"

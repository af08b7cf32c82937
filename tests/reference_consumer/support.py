"""A reference consumer process, a publisher with confirms, and a look at a queue's depth.

Tests synchronise on the consumer's event feed (``/_admin/events`` with ``wait``), never on
sleeps: each wait is bounded, and says what it was waiting for when it gives up.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aio_pika
import httpx

from harness.services._network import free_port
from harness.services._processes import ManagedProcess
from tests.reference_server.support import wait_until

__all__ = ["CHARGE", "ConsumerProcess", "Event", "is_", "publish", "queue_depth", "unique", "until"]

Event = dict[str, Any]
CHARGE = {"amount": 1250, "currency": "EUR"}
_names = itertools.count()


def unique(prefix: str) -> str:
    """A name no other test of this session uses (queues, keys)."""
    return f"{prefix}-{time.time_ns() % 10**9}-{next(_names)}"


class ConsumerProcess:
    """``python -m reference_server consume`` with an admin port, started and stopped here."""

    def __init__(self, amqp_url: str, queue: str, *, store: str, log_dir: Path,
                 options: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.queue = queue
        command = [sys.executable, "-m", "reference_server", "consume", "--amqp-url", amqp_url,
                   "--queue", queue, "--store", store, "--admin-port", str(self.port),
                   "--requeue-delay", "50ms", *options]
        self._process = ManagedProcess(
            f"consumer {queue}", command, log_path=log_dir / f"{queue}-{self.port}.log",
            ready_url=f"{self.base}/_admin/health", start_timeout=60.0)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConsumerProcess:
        self._process.start()
        return self

    def stop(self) -> None:
        self._process.stop()

    def kill(self) -> None:
        self._process.kill()

    def log(self) -> str:
        return self._process.log_tail(40)

    def events(self, after: int = 0, *, wait: float = 0.0) -> tuple[list[Event], int]:
        answer = httpx.get(f"{self.base}/_admin/events", params={"after": after, "wait": wait},
                           timeout=wait + 10).json()
        return answer["events"], answer["next"]

    def wait_for(self, what: str, predicate: Callable[[Event], bool], *,
                 timeout: float = 30.0) -> Event:
        """The first event (from the start of this process's feed) that ``predicate`` accepts."""
        deadline = time.monotonic() + timeout
        cursor = 0
        while (remaining := deadline - time.monotonic()) > 0:
            found, cursor = self.events(cursor, wait=min(remaining, 5.0))
            for event in found:
                if predicate(event):
                    return event
        raise AssertionError(f"no {what} within {timeout:g} s; the consumer's log:\n{self.log()}")

    def count(self, predicate: Callable[[Event], bool]) -> int:
        return sum(1 for event in self.events()[0] if predicate(event))

    def effects(self, key: str) -> int:
        count: int = httpx.get(f"{self.base}/_admin/effects", params={"key": key},
                               timeout=10).json()["count"]
        return count

    def admin(self, method: str, path: str, **kwargs: Any) -> Any:
        return httpx.request(method, f"{self.base}/_admin{path}", timeout=10, **kwargs).json()


def is_(type_: str, key: str | None = None, **fields: Any) -> Callable[[Event], bool]:
    """A predicate: an event of ``type_`` (for ``key``) with these field values."""
    def matches(event: Event) -> bool:
        return (event["type"] == type_ and (key is None or event.get("key") == key)
                and all(event.get(name) == value for name, value in fields.items()))
    return matches


def until(what: str, condition: Callable[[], bool], *, timeout: float = 30.0) -> None:
    """Look at ``condition`` every 50 ms (it reads event feeds) until it holds, or fail."""
    wait_until(condition, what, timeout=timeout, every=0.05)


def publish(amqp_url: str, queue: str, messages: Sequence[Mapping[str, Any]]) -> None:
    """Publish each message (``body``: a JSON value or bytes; ``key``; ``message_id``;
    ``headers``) with publisher confirms, in order, on one connection."""

    async def run() -> None:
        connection = await aio_pika.connect(amqp_url)
        try:
            channel = await connection.channel()
            for spec in messages:
                body = spec.get("body", CHARGE)
                headers = dict(spec.get("headers", {}))
                if spec.get("key") is not None:
                    headers["Idempotency-Key"] = spec["key"]
                await channel.default_exchange.publish(aio_pika.Message(
                    body if isinstance(body, bytes) else json.dumps(body).encode(),
                    message_id=spec.get("message_id") or unique("msg"), headers=headers,
                    delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                    content_type="application/json"), routing_key=queue)
        finally:
            await connection.close()

    asyncio.run(run())


def queue_depth(amqp_url: str, queue: str) -> int:
    """Messages ready in ``queue`` (a passive declare; the queue must exist)."""

    async def run() -> int:
        connection = await aio_pika.connect(amqp_url)
        try:
            channel = await connection.channel()
            declared = await channel.declare_queue(queue, passive=True)
            count = declared.declaration_result.message_count
            return int(count or 0)
        finally:
            await connection.close()

    return asyncio.run(run())

"""What the Kafka tests share: unique names, and a plain group consumer to read with.

The consumer is confluent-kafka's own, as a team would write one: it joins a group, polls, and
commits only when told.  Every wait is bounded in time and says what it waited for.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, Message

__all__ = ["GroupReader", "group_reader", "unique"]

_names = itertools.count()


def unique(prefix: str) -> str:
    """A topic, group or key name no other test of this session uses."""
    return f"{prefix}-{time.time_ns() % 10**9}-{next(_names)}"


class GroupReader:
    """A member of a consumer group, reading one topic from its start; commits on request."""

    def __init__(self, bootstrap: str, topic: str, group: str, **settings: Any) -> None:
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500, "reconnect.backoff.max.ms": 500,
            "socket.connection.setup.timeout.ms": 2000, "log_level": 0, **settings})
        self.consumer.subscribe([topic])

    def read(self, count: int, *, timeout: float = 20.0) -> list[Message]:
        """The next ``count`` messages; fails after ``timeout`` seconds with what it got."""
        got: list[Message] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"read {len(got)} of {count} message(s) in {timeout:g} s")
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
        return got

    def nothing_for(self, seconds: float) -> list[Message]:
        """Whatever arrives within ``seconds`` (a test that expects nothing asserts it empty)."""
        got: list[Message] = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            message = self.consumer.poll(0.2)
            if message is not None and message.error() is None:
                got.append(message)
        return got

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


@contextmanager
def group_reader(bootstrap: str, topic: str, group: str, **settings: Any
                 ) -> Iterator[GroupReader]:
    reader = GroupReader(bootstrap, topic, group, **settings)
    try:
        yield reader
    finally:
        reader.close()

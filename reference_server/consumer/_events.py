"""What the consumer did, as a numbered feed the harness can wait on instead of sleeping.

Every delivery, claim, commit, ack, nack and dead-lettering is an event: a plain dict with a
running ``index`` from 0.  ``GET /_admin/events?after=N`` returns the events numbered N and
later, and ``next``, the N to ask for next time (so ``after=0`` is everything); ``wait=SECONDS``
holds the answer until there is at least one.  Each event is also printed to stdout as one JSON
line after ``event ``, for a harness that reads the log.  The feed keeps the newest ``LIMIT``
events; indices never restart.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
import time
from collections import deque
from typing import Any

__all__ = ["LIMIT", "EventLog"]

LIMIT = 100_000


class EventLog:
    def __init__(self, *, echo: bool = True) -> None:
        self._events: deque[dict[str, Any]] = deque(maxlen=LIMIT)
        self._next = 0
        self._echo = echo
        self._changed = asyncio.Event()

    @property
    def next_index(self) -> int:
        return self._next

    def record(self, type_: str, **fields: Any) -> dict[str, Any]:
        """Append one event; ``fields`` whose value is ``None`` are left out."""
        event = {"index": self._next, "type": type_, "time": time.time(), "pid": os.getpid()}
        event.update({name: value for name, value in fields.items() if value is not None})
        self._next += 1
        self._events.append(event)
        if self._echo:
            sys.stdout.write(f"event {json.dumps(event, separators=(',', ':'))}\n")
            sys.stdout.flush()
        self._changed.set()
        self._changed = asyncio.Event()
        return event

    def since(self, cursor: int) -> list[dict[str, Any]]:
        """The events numbered ``cursor`` and later (those still kept)."""
        first = self._next - len(self._events)  # the oldest index still kept
        return list(itertools.islice(self._events, max(cursor - first, 0), None))

    async def wait_since(self, cursor: int, timeout: float) -> list[dict[str, Any]]:
        """The events numbered ``cursor`` and later, waiting up to ``timeout`` seconds for one."""
        deadline = time.monotonic() + timeout
        while not (events := self.since(cursor)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return []
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return []
        return events

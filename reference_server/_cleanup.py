"""The retention job: delete keys older than the retention, on an interval and on demand.

The claim already treats an expired row as absent, so cleanup is about storage (P11), not about
correctness of replays.  A pass runs every ``interval`` seconds, when an admin asks, and right
after the test clock moves, so a test never waits for the interval.  Passes never overlap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from reference_server._clock import ServerClock
from reference_server.stores import Store, StoreUnavailable

__all__ = ["CleanupJob"]

logger = logging.getLogger(__name__)


class CleanupJob:
    def __init__(
        self, store: Store, clock: ServerClock, *, retention: float, interval: float,
        enabled: bool = True,
    ) -> None:
        self._store = store
        self._clock = clock
        self._retention = timedelta(seconds=retention)
        self._interval = interval
        self.enabled = enabled
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.enabled:
            self._task = asyncio.create_task(self._every_interval(), name="cleanup-job")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def run_once(self) -> int:
        """One pass now; the number of keys deleted (always 0 when the job is disabled)."""
        if not self.enabled:
            return 0
        async with self._lock:
            now = await self._clock.now()
            deleted = await self._store.delete_expired(now - self._retention, now)
        if deleted:
            logger.info("cleanup deleted %d expired keys", deleted)
        return deleted

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await self.run_once()
            except StoreUnavailable as exc:
                logger.warning("cleanup skipped this pass: %s", exc)

"""The server's clock: the wall clock, plus an offset the harness may advance (``--test-clock``).

Leases, retention, cleanup and charge timestamps all read this clock, so advancing it is how a
test reaches "six hours later" or "after the lease" without waiting.  The offset lives in the
store, not in the process: several processes sharing one PostgreSQL agree on the time, and a
restarted process keeps it.  Without ``--test-clock`` the offset is never read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reference_server.stores import Store

__all__ = ["ServerClock"]


class ServerClock:
    def __init__(self, store: Store, *, adjustable: bool) -> None:
        self._store = store
        self.adjustable = adjustable

    async def now(self) -> datetime:
        offset = await self._store.clock_offset() if self.adjustable else 0.0
        return datetime.now(UTC) + timedelta(seconds=offset)

    async def advance(self, seconds: float) -> datetime:
        """Move the shared clock forward; only a server started with ``--test-clock`` may."""
        if not self.adjustable:
            raise RuntimeError("the clock is only adjustable with --test-clock")
        offset = await self._store.advance_clock(seconds)
        return datetime.now(UTC) + timedelta(seconds=offset)

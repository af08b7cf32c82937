"""Claiming a key: the one decision every store makes the same way.

A request with a key finds one of five things: no usable row (claim it), a row whose lease ran
out (take it over with a new fencing token), a finished row with the same fingerprint (replay
it), the same key with another request (422), or a live claim (409 or wait).  ``judge`` decides
which from a row; a store applies the decision atomically (PostgreSQL in one upsert, SQLite
under its write lock), and ``claim_atomically`` retries when the row changed in between, as
``complete_atomically`` does for a claim that carries its finished work.

The two racy flaws claim differently on purpose and live here beside the correct claim, so
the difference is one screen of code.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from reference_server._model import KeyRecord, StoredResponse

if TYPE_CHECKING:
    from reference_server.stores import Completion, Store

__all__ = [
    "RACE_WINDOW",
    "ClaimOutcome",
    "ClaimRequest",
    "Claimed",
    "InProgress",
    "Replay",
    "Reuse",
    "Verdict",
    "check_then_claim",
    "check_without_claim",
    "claim_atomically",
    "complete_atomically",
    "judge",
]

# How long the racy flaws leave between looking at the key and writing it: the round trip to a
# remote database that makes this mistake lose races in production, widened so it shows here.
RACE_WINDOW = 0.05

# A row that changes between the atomic attempt and the read of it (a concurrent claim, a
# release, the cleanup job) makes the claim try again; a key that keeps changing is busy.
_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class ClaimRequest:
    """Everything a store needs to claim one key at one moment of the server clock."""

    tenant: str
    key: str
    fingerprint: str
    now: datetime
    lease: timedelta
    retention: timedelta
    lease_recovery: bool = True

    @property
    def lease_until(self) -> datetime:
        return self.now + self.lease

    @property
    def expired_before(self) -> datetime:
        """Rows created at or before this instant are past retention: treated as absent."""
        return self.now - self.retention


@dataclass(frozen=True, slots=True)
class Claimed:
    """This request owns the key; ``token`` fences its commit."""

    token: int


@dataclass(frozen=True, slots=True)
class Replay:
    response: StoredResponse


@dataclass(frozen=True, slots=True)
class InProgress:
    """Another request holds a live claim on the key."""


@dataclass(frozen=True, slots=True)
class Reuse:
    """The key was used for a different request."""


ClaimOutcome = Claimed | Replay | InProgress | Reuse


class Verdict(enum.Enum):
    NEW = "new"
    TAKE_OVER = "take_over"
    REPLAY = "replay"
    IN_PROGRESS = "in_progress"
    REUSE = "reuse"


def judge(record: KeyRecord | None, request: ClaimRequest) -> Verdict:
    """What ``request`` may do with the key, given its current row."""
    if record is None or record.created_at <= request.expired_before:
        return Verdict.NEW
    if record.fingerprint != request.fingerprint:
        return Verdict.REUSE
    if record.response is not None:
        return Verdict.REPLAY
    lease_over = record.locked_until is not None and record.locked_until <= request.now
    if request.lease_recovery and lease_over:
        return Verdict.TAKE_OVER
    return Verdict.IN_PROGRESS


def _settled(record: KeyRecord, request: ClaimRequest) -> ClaimOutcome | None:
    """The outcome for a row this request did not claim; ``None`` if it could have."""
    verdict = judge(record, request)
    if verdict is Verdict.REPLAY:
        assert record.response is not None
        return Replay(record.response)
    if verdict is Verdict.IN_PROGRESS:
        return InProgress()
    if verdict is Verdict.REUSE:
        return Reuse()
    return None


async def claim_atomically(store: Store, request: ClaimRequest) -> ClaimOutcome:
    """The correct claim: the store decides and writes in one atomic step."""
    return await _atomically(lambda: store.claim(request), request)


async def complete_atomically(store: Store, completion: Completion) -> ClaimOutcome:
    """The correct claim of a request whose work is done: if it takes (``Claimed``), the work
    and the response were written with it, in the same atomic step."""
    return await _atomically(lambda: store.claim_completed(completion), completion.claim)


async def _atomically(
    attempt: Callable[[], Awaitable[Claimed | KeyRecord | None]], request: ClaimRequest
) -> ClaimOutcome:
    for _ in range(_ATTEMPTS):
        result = await attempt()
        if isinstance(result, Claimed):
            return result
        if result is not None and (outcome := _settled(result, request)) is not None:
            return outcome
    return InProgress()


async def check_then_claim(store: Store, request: ClaimRequest) -> ClaimOutcome:
    """Flaw ``check-then-insert``: look, then insert without checking that the insert took.

    Every request that looked before the first insert landed believes it owns the key, and
    all of them carry the same token, so fencing cannot tell them apart.
    """
    record = await store.lookup(request.tenant, request.key)
    if record is not None and (outcome := _settled(record, request)) is not None:
        return outcome
    await asyncio.sleep(RACE_WINDOW)
    return Claimed(await store.claim_unchecked(request))


async def check_without_claim(store: Store, request: ClaimRequest) -> ClaimOutcome | None:
    """Flaw ``insert-after-work``: look, and if nothing is there run the work unclaimed.

    ``None`` means "go ahead"; the key is written only after the work, by ``claim_unchecked``.
    """
    record = await store.lookup(request.tenant, request.key)
    if record is not None and (outcome := _settled(record, request)) is not None:
        return outcome
    await asyncio.sleep(RACE_WINDOW)
    return None

"""What the idempotency layer needs from a store, whatever database is behind it.

Every method is one transaction.  ``commit`` is the one that matters most: the stored response
and the handler's charges land together or not at all, and only while the key still holds the
claim's fencing token.  ``claim_completed`` is the claim and the commit in one transaction, for
a request whose work was done before its key was claimed (``Completion``).  Any failure to
reach the database comes out as ``StoreUnavailable``, which the layer answers with 503; nothing
else a store raises is expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from reference_server._claims import Claimed, ClaimRequest
from reference_server._model import Charge, KeyRecord, KeyStats, StoredResponse

__all__ = ["Commit", "Completion", "Store", "StoreKind", "StoreUnavailable"]

StoreKind = Literal["sqlite", "postgresql"]


class StoreUnavailable(Exception):
    """The store could not be reached or did not answer in time; the outcome may be unknown."""


@dataclass(frozen=True, slots=True)
class Commit:
    """The end of a claimed request: its response and its work, for one transaction.

    ``token`` ``None`` commits whatever claim holds the key (the ``no-fencing`` flaw).
    """

    tenant: str
    key: str
    token: int | None
    response: StoredResponse
    charges: Sequence[Charge]
    client_key: str | None


@dataclass(frozen=True, slots=True)
class Completion:
    """A request whose work is done but not yet written: if its claim takes, the key is written
    complete with ``response``, and ``charges`` land, all in one transaction; if it does not,
    nothing is written and the work is dropped."""

    claim: ClaimRequest
    response: StoredResponse
    charges: Sequence[Charge]
    client_key: str | None

    @property
    def tenant(self) -> str:
        return self.claim.tenant

    @property
    def key(self) -> str:
        return self.claim.key


class Store(Protocol):
    """A key table, a ledger of charges and the test clock's offset, in one database."""

    @property
    def kind(self) -> StoreKind: ...

    async def open(self) -> None:
        """Connect and create the schema if it is absent (safe when processes race to do it)."""

    async def close(self) -> None: ...

    async def claim(self, request: ClaimRequest) -> Claimed | KeyRecord | None:
        """Claim the key if ``judge`` allows it, atomically; else the row as it stands.

        ``None`` means the row vanished between the attempt and the read: try again.
        """

    async def claim_completed(self, completion: Completion) -> Claimed | KeyRecord | None:
        """``claim``, and if the claim takes, the completion's response and charges with it."""

    async def lookup(self, tenant: str, key: str) -> KeyRecord | None: ...

    async def claim_unchecked(self, request: ClaimRequest) -> int:
        """Insert the key if absent and return the token now on it, claimed or not (a flaw)."""

    async def commit(self, commit: Commit) -> bool:
        """Store the response and insert the charges, if the token still holds; True if so."""

    async def release(self, tenant: str, key: str, token: int) -> None:
        """Delete the key if it is still in progress under ``token``."""

    async def record_charges(self, charges: Sequence[Charge], client_key: str | None) -> None:
        """Insert charges on their own, for requests no key governs."""

    async def get_charge(self, tenant: str, charge_id: str) -> Charge | None: ...

    async def effects(self, tenant: str, client_key: str | None) -> list[str]:
        """Ids of the charges made by requests of ``tenant`` that carried ``client_key``."""

    async def effects_total(self) -> int: ...

    async def key_stats(self) -> KeyStats: ...

    async def delete_expired(self, expired_before: datetime, now: datetime) -> int:
        """Delete rows created at or before ``expired_before`` that no live lease holds."""

    async def clock_offset(self) -> float: ...

    async def advance_clock(self, seconds: float) -> float:
        """Add ``seconds`` to the shared test-clock offset and return the new offset."""

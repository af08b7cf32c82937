"""Where the charge handler writes its side effect, without knowing about keys.

The handler calls ``ledger_of(scope).record(charge)`` and assumes it is the first attempt, as
the seed says domain logic should.  The idempotency layer decides what ``record`` means: for a
claimed key it hands in ``PendingWork``, whose charges commit later in the same transaction as
the stored response; for a request no key governs, a ``DirectLedger`` that writes at once.

The client's key travels with the charge only as request-origin metadata (``client_key``), so
the harness's oracle can count charges per key even when a flaw stores the key differently.
"""

from __future__ import annotations

from typing import Protocol

from reference_server._model import Charge
from reference_server._types import Scope
from reference_server.stores import Store

__all__ = ["DirectLedger", "Ledger", "PendingWork", "ledger_of", "with_ledger"]

_SCOPE_KEY = "reference_server.ledger"


class Ledger(Protocol):
    async def record(self, charge: Charge) -> None: ...


class PendingWork:
    """The charges of one claimed request, held until the layer commits or drops them."""

    def __init__(self) -> None:
        self.charges: list[Charge] = []

    async def record(self, charge: Charge) -> None:
        self.charges.append(charge)


class DirectLedger:
    """Writes each charge in its own transaction; no key governs it, so it has no origin key."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def record(self, charge: Charge) -> None:
        await self._store.record_charges([charge], None)


def with_ledger(scope: Scope, ledger: Ledger) -> Scope:
    return {**scope, _SCOPE_KEY: ledger}


def ledger_of(scope: Scope) -> Ledger | None:
    ledger: Ledger | None = scope.get(_SCOPE_KEY)
    return ledger

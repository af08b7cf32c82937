"""The service behind the idempotency layer: charges, and nothing about keys.

``POST /charges`` validates the charge, waits the simulated provider latency, and records one
charge in the ledger: the side effect the harness counts.  It assumes every call is the first
attempt, as domain logic should; deduplication is the layer's job.  ``GET /charges/{id}``
reads one of the caller's own charges.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from reference_server._clock import ServerClock
from reference_server._fingerprint import InvalidJson, decode_json
from reference_server._ledger import DirectLedger, ledger_of
from reference_server._model import Charge
from reference_server._tenants import InvalidAuthorization, tenant_of
from reference_server._types import Receive, Scope, Send
from reference_server.stores import Store, StoreUnavailable

__all__ = ["MAX_AMOUNT", "ChargeFields", "ChargeService", "InvalidCharge", "parse_charge"]

MAX_AMOUNT = 2**53 - 1  # the largest integer every JSON client reads exactly
_FIELDS = frozenset({"amount", "currency", "customer"})
_MAX_CUSTOMER = 255


class InvalidCharge(ValueError):
    """The body is JSON but not a valid charge; the message names the field."""


@dataclass(frozen=True, slots=True)
class ChargeFields:
    amount: int
    currency: str
    customer: str | None


def parse_charge(document: Any) -> ChargeFields:
    if not isinstance(document, dict):
        raise InvalidCharge("the body must be a JSON object")
    unknown = sorted(set(document) - _FIELDS)
    if unknown:
        raise InvalidCharge(f"unknown field(s): {', '.join(unknown)}")
    amount = document.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, int) or not 0 < amount <= MAX_AMOUNT:
        raise InvalidCharge(f"amount must be an integer from 1 to {MAX_AMOUNT}")
    currency = document.get("currency")
    if not isinstance(currency, str) or len(currency) != 3 or not (
        currency.isascii() and currency.isalpha()
    ):
        raise InvalidCharge("currency must be three letters, such as EUR")
    customer = document.get("customer")
    if customer is not None and (not isinstance(customer, str) or len(customer) > _MAX_CUSTOMER):
        raise InvalidCharge(f"customer must be a string of at most {_MAX_CUSTOMER} characters")
    return ChargeFields(amount, currency, customer)


def _error(status: int, error: str, detail: str | None = None) -> JSONResponse:
    document = {"error": error} if detail is None else {"error": error, "detail": detail}
    return JSONResponse(document, status)


class ChargeService:
    """The charge endpoints as an ASGI app (``.app``), writing through the request's ledger."""

    def __init__(self, store: Store, clock: ServerClock, *, work_delay: float = 0.0) -> None:
        self._store = store
        self._clock = clock
        self._work_delay = work_delay
        self._direct = DirectLedger(store)
        self.app = Router(
            routes=[
                Route("/charges", self.create, methods=["POST"]),
                Route("/charges/{charge_id}", self.read, methods=["GET"]),
            ],
            redirect_slashes=False,
            default=self.not_found,
        )

    async def create(self, request: Request) -> Response:
        try:
            tenant = tenant_of(request.scope["headers"])
        except InvalidAuthorization as exc:
            return _error(401, "invalid_authorization", str(exc))
        try:
            document = decode_json(await request.body())
        except InvalidJson as exc:  # the layer refuses these first; served bare, so does this
            return _error(400, "invalid_json", str(exc))
        try:
            fields = parse_charge(document)
        except InvalidCharge as exc:
            return _error(400, "invalid_charge", str(exc))
        if self._work_delay:
            await asyncio.sleep(self._work_delay)
        charge = Charge(
            id=f"ch_{secrets.token_hex(12)}",
            tenant=tenant,
            amount=fields.amount,
            currency=fields.currency,
            customer=fields.customer,
            created_at=await self._clock.now(),
        )
        await (ledger_of(request.scope) or self._direct).record(charge)
        return JSONResponse(charge.to_json(), 201, headers={"Location": f"/charges/{charge.id}"})

    async def read(self, request: Request) -> Response:
        try:
            tenant = tenant_of(request.scope["headers"])
        except InvalidAuthorization as exc:
            return _error(401, "invalid_authorization", str(exc))
        try:
            charge = await self._store.get_charge(tenant, request.path_params["charge_id"])
        except StoreUnavailable:
            return JSONResponse({"error": "store_unavailable"}, 503, headers={"Retry-After": "1"})
        if charge is None:
            return _error(404, "not_found")
        return JSONResponse(charge.to_json())

    @staticmethod
    async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
        await _error(404, "not_found")(scope, receive, send)

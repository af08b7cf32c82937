"""A per-fault error policy: an exception releases the key, a 5xx the handler answers is kept.

Choices: an exception raised by the handler means the request did not happen, so the key is
released and a retry runs it again; a 5xx the handler returns on purpose (the payment provider
is unavailable: 502) is a final answer, stored and replayed with ``Idempotent-Replayed: true``
for the whole retention, like any other.  Validation errors are stored too.  The body's
``currency`` is ``usd`` or ``eur`` (anything else is 400), and the fingerprint covers method,
path and the whole body, so the same key with only the currency changed is a reused key (422).
Tenants come from ``X-Account-Id``.  A bare ASGI callable under uvicorn; state per process.

Flaw: ``currency-blind`` leaves ``currency`` out of the fingerprint (the account was thought to
fix it), so a request that changes only the currency is answered with the first one's replay.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Collection
from typing import Any

from tests.corpus.services._kit import (
    InMemory,
    Record,
    Req,
    Resp,
    arguments,
    drop_expired,
    error,
    fingerprint,
    pause,
    read_keyed,
    serve_asgi,
    valid_amount,
)

RETENTION = 24 * 3600.0
CURRENCIES = ("usd", "eur")
FLAWS = ("currency-blind",)


class ProviderDown(Exception):
    """The payment provider did not answer: the handler answers 502 itself."""


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.records: dict[tuple[str, str], Record] = {}

    async def handle(self, req: Req) -> Resp:
        if req.path == "/charges":
            return await self.charge(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/up":
            return Resp(200, {"ok": True})
        if req.path == "/ops/ledger":
            return self.ledger.answer(req.query)
        if req.path == "/ops/clock" and req.method == "POST":
            self.clock.advance(float(json.loads(req.body)["seconds"]))
            return Resp(200, self.clock.now())
        if req.path == "/ops/now":
            return Resp(200, self.clock.now())
        if req.path == "/ops/keys":
            self.expire()
            running = sum(1 for r in self.records.values() if r.answer is None)
            return Resp(200, {"rows": len(self.records), "in_progress": running})
        return error(404, "no such route")

    def expire(self) -> None:
        drop_expired(self.records, self.clock.now() - RETENTION, lambda r: r.created)

    def fingerprint_of(self, req: Req, body: Any) -> str:
        if "currency-blind" in self.flaws and isinstance(body, dict):
            body = {k: v for k, v in body.items() if k != "currency"}
        return fingerprint(req.method, req.target, body)

    async def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=128)
        if isinstance(got, Resp):
            return got
        tenant, key, body = req.headers.get("x-account-id", "-"), got.key, got.body
        fp = self.fingerprint_of(req, body)
        slot = (tenant, key)
        # One event loop and no await from the look-up to the claim: the claim is atomic.
        self.expire()
        record = self.records.get(slot)
        if record is not None:
            if record.fp != fp:
                return error(422, "this key belongs to another request")
            if record.answer is None:
                return error(409, "a request with this key is in progress",
                             **{"Retry-After": "1"})
            return Resp(record.answer.status, record.answer.body,
                        {**record.answer.headers, "Idempotent-Replayed": "true"})
        record = self.records[slot] = Record(fp, self.clock.now())
        try:
            answer = await self.perform(req, body)
        except Exception:
            del self.records[slot]  # an exception: nothing happened, the key is free again
            return error(500, "the charge failed; retry")
        if answer.status == 201:
            self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
        record.answer = answer  # a 502 included: with the ledger row, no await in between
        return answer

    async def perform(self, req: Req, body: Any) -> Resp:
        await pause(req.headers.get("x-test-delay-ms"))
        fault = req.headers.get("x-fault")
        if fault == "exception":
            raise RuntimeError("injected handler error")
        if not valid_amount(body):
            return error(400, "amount must be a positive integer")
        if body.get("currency") not in CURRENCIES:
            return error(400, f"currency must be one of {', '.join(CURRENCIES)}")
        try:
            await self.provider(fault)
        except ProviderDown:
            return error(502, "the payment provider is unavailable")
        charge = "ch_" + secrets.token_hex(6)
        return Resp(201, {"id": charge, "amount": body["amount"], "currency": body["currency"]},
                    {"Location": f"/charges/{charge}"})

    async def provider(self, fault: str | None) -> None:
        await asyncio.sleep(0.01)
        if fault == "provider-down":
            raise ProviderDown


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_asgi(Service(args.flaws).handle, args.host, args.port)

"""Validation errors are not stored: a 4xx for an invalid body is answered fresh every time.

Choices: like Stripe, a request refused by validation (here: an amount that is not a positive
integer) releases its key, so the client may fix the body and send it again with the same key;
only answers of the handler proper (2xx) are stored and replayed.  Replays are marked with
``Idempotent-Replayed: true``.  A bare ASGI callable under uvicorn keeps the keys in memory,
per process, and a failing handler releases its key.

Flaws: ``short-retention`` forgets keys after 1 h although 24 h is promised; ``replay-5xx``
stores a failing handler's 500 and replays it although the key is promised to be released.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Collection
from typing import Any

from tests.corpus.services._kit import (
    InMemory,
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
FLAWS = ("short-retention", "replay-5xx")
RUNNING = "running"


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.retention = 3600.0 if "short-retention" in flaws else RETENTION
        # (tenant, key) -> [fingerprint, created, answer or RUNNING]
        self.keys: dict[tuple[str, str], list[Any]] = {}

    async def handle(self, req: Req) -> Resp:
        if req.path == "/payments" and req.method == "POST":
            return await self.pay(req)
        if req.path == "/payments":
            return error(405, "POST only")
        if req.path == "/status":
            return Resp(200, {"ok": True})
        if req.path == "/__effects":
            return self.ledger.answer(req.query)
        if req.path == "/__clock" and req.method == "POST":
            self.clock.advance(float(json.loads(req.body)["seconds"]))
            return Resp(200, {"now": self.clock.now()})
        if req.path == "/__keys":
            self.forget_expired()
            running = sum(1 for v in self.keys.values() if v[2] is RUNNING)
            return Resp(200, {"rows": len(self.keys), "in_progress": running})
        return error(404, "no such route")

    def forget_expired(self) -> None:
        drop_expired(self.keys, self.clock.now() - self.retention, lambda v: v[1])

    async def pay(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=255)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        slot = (tenant, key)
        # One event loop and no await between the look-up and the insert: the claim is atomic.
        self.forget_expired()
        held = self.keys.get(slot)
        if held is not None:
            if held[0] != fp:
                return error(422, "the key was used with a different request")
            if held[2] is RUNNING:
                return error(409, "in progress", **{"Retry-After": "1"})
            stored: Resp = held[2]
            return Resp(stored.status, stored.body, {**stored.headers,
                                                     "Idempotent-Replayed": "true"})
        self.keys[slot] = [fp, self.clock.now(), RUNNING]
        try:
            await pause(req.headers.get("x-test-delay-ms"))
            if req.headers.get("x-test-fault") == "explode":
                raise RuntimeError("injected handler error")
            if not valid_amount(body):  # refused, not stored: the client may fix the body
                del self.keys[slot]
                return error(400, "amount must be a positive integer")
            await asyncio.sleep(0.01)  # the payment provider
        except Exception:
            if "replay-5xx" in self.flaws:
                self.keys[slot][2] = error(500, "the payment failed")
            else:
                del self.keys[slot]
            return error(500, "the payment failed")
        payment = "py_" + secrets.token_hex(6)
        answer = Resp(201, {"id": payment, "amount": body["amount"]},
                      {"Location": f"/payments/{payment}"})
        self.ledger.add({"id": payment, "tenant": tenant, "key": key})
        self.keys[slot][2] = answer  # with the ledger row: no await in between
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_asgi(Service(args.flaws).handle, args.host, args.port)

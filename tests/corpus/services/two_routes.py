"""Two keyed operations that share one key space, served by a bare ASGI callable.

Choices: ``POST /charges`` and ``POST /payouts`` are both keyed, and a key belongs to the
tenant, not to a route (as at Stripe): a key first used for a charge and then sent to the
payouts route is a reused key and gets 422.  Every answer to a keyed request carries
``Idempotent-Replayed``: ``false`` when it was computed now, ``true`` when it is a replay, so a
client can always tell.  State is per process (a dict guarded by an asyncio lock): two
processes are two services, and a restart forgets every key, so no crash hook is offered.

Flaws: ``fingerprint-no-path`` leaves the route out of the fingerprint (a payout with a
charge's key is answered with the charge); ``no-tenant-scope`` keys the store by key alone.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Collection
from dataclasses import dataclass, field
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
ROUTES = {"/charges": "ch", "/payouts": "po"}
FLAWS = ("fingerprint-no-path", "no-tenant-scope")


@dataclass
class Entry(Record):
    finished: asyncio.Event = field(default_factory=asyncio.Event)


class Service(InMemory):
    def __init__(self, flaws: Collection[str], *, effects_lag: float = 0.0) -> None:
        super().__init__(flaws, effects_lag=effects_lag)
        self.entries: dict[tuple[str, str], Entry] = {}
        self.lock = asyncio.Lock()

    async def handle(self, req: Req) -> Resp:
        if req.path in ROUTES:
            if req.method != "POST":
                return Resp(405, {"error": "POST only"}, {"Allow": "POST"})
            return await self.keyed(req)
        if req.path == "/healthz":
            return Resp(200, {"ok": True})
        if req.path == "/test/effects":
            return self.ledger.answer(req.query)
        if req.path == "/test/clock" and req.method == "POST":
            self.clock.advance(float(json.loads(req.body)["seconds"]))
            return Resp(200, {"now": self.clock.now()})
        if req.path == "/test/keys":
            self.expire()
            running = sum(1 for e in self.entries.values() if e.answer is None)
            return Resp(200, {"rows": len(self.entries), "in_progress": running})
        return error(404, "no such route")

    def expire(self) -> None:
        drop_expired(self.entries, self.clock.now() - RETENTION, lambda e: e.created)

    async def keyed(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=100)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        where = "" if "fingerprint-no-path" in self.flaws else req.target
        fp = fingerprint(req.method, where, body)
        slot = ("*" if "no-tenant-scope" in self.flaws else tenant, key)
        async with self.lock:
            self.expire()
            entry = self.entries.get(slot)
            if entry is None:
                entry = self.entries[slot] = Entry(fp, self.clock.now())
                mine = True
            else:
                mine = False
        if not mine:
            if entry.fp != fp:
                return error(422, "the key was used for another request")
            if entry.answer is None:
                return error(409, "in progress", **{"Retry-After": "1"})
            return Resp(entry.answer.status, entry.answer.body,
                        {**entry.answer.headers, "Idempotent-Replayed": "true"})
        try:
            answer = await self.work(req, tenant, key, body)
        except Exception:
            async with self.lock:  # release: the retry runs the request again
                if self.entries.get(slot) is entry:
                    del self.entries[slot]
            entry.finished.set()
            return error(500, "the operation failed; retry")
        entry.finished.set()
        return Resp(answer.status, answer.body, {**answer.headers, "Idempotent-Replayed": "false"})

    async def work(self, req: Req, tenant: str, key: str, body: Any) -> Resp:
        await pause(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "boom":
            raise RuntimeError("injected handler error")
        if not valid_amount(body):
            answer = error(400, "amount must be a positive integer")
        else:
            await asyncio.sleep(0.01)  # the payment provider
            rid = f"{ROUTES[req.path]}_{secrets.token_hex(6)}"
            answer = Resp(201, {"id": rid, "amount": body["amount"]},
                          {"Location": f"{req.path}/{rid}"})
        async with self.lock:  # the effect and the stored answer, with no await between
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
            slot = ("*" if "no-tenant-scope" in self.flaws else tenant, key)
            self.entries[slot].answer = answer
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_asgi(Service(args.flaws, effects_lag=args.effects_lag_ms / 1000).handle, args.host,
               args.port)

"""423 Locked while a key is in progress; every failure releases the key.

Choices: a retry that arrives while the original still runs gets ``423 Locked`` (WebDAV's
status, which some libraries use for "this key is locked by a running request") with no
Retry-After; a reused key gets 422.  Any failure releases the key, whether the handler raises
or answers a 5xx itself (its 503 reaches the client but is not stored), so a retry runs the
request again.  Replays carry ``X-Idempotent-Replay: 1``.  Keys are 1 to 64 unreserved URI
characters.  Tenants come from ``X-Tenant``.  A bare ASGI callable under uvicorn, state per
process, and no clock hook: the clock is the process's own (the harness moves it from outside).

Flaws: ``placeholder-200`` answers a retry that arrives while the original runs at once with
``200 {}`` marked as a replay; ``cache-5xx`` caches whatever the handler ends with: its own 503
is stored and replayed, and an exception's 500 is stored under an empty fingerprint, so
identical retries after it are told the key belongs to another request.
"""

from __future__ import annotations

import asyncio
import re
import secrets
from collections.abc import Collection
from dataclasses import dataclass
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
KEY = re.compile(r"[0-9A-Za-z._~-]{1,64}")
REPLAY = {"X-Idempotent-Replay": "1"}
FLAWS = ("placeholder-200", "cache-5xx")


@dataclass
class Lock:
    fp: str
    created: float
    answer: Resp | None = None


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.locks: dict[tuple[str, str], Lock] = {}

    async def handle(self, req: Req) -> Resp:
        if req.path == "/api/transfers":
            return await self.keyed(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/ready":
            return Resp(200, {"ok": True})
        if req.path == "/api/_effects":
            return self.ledger.answer(req.query)
        if req.path == "/api/_locks":
            self.expire()
            running = sum(1 for lock in self.locks.values() if lock.answer is None)
            return Resp(200, {"rows": len(self.locks), "in_progress": running})
        return error(404, "no such route")

    def expire(self) -> None:
        drop_expired(self.locks, self.clock.now() - RETENTION, lambda lock: lock.created)

    async def keyed(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=64, pattern=KEY,
                         pattern_error="keys are 1 to 64 of A-Z a-z 0-9 . _ ~ -")
        if isinstance(got, Resp):
            return got
        tenant, key, body = req.headers.get("x-tenant", "-"), got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        slot = (tenant, key)
        self.expire()  # no await from here to the claim: one event loop, an atomic claim
        lock = self.locks.get(slot)
        if lock is not None:
            if lock.fp != fp:
                return error(422, "this key was used for another request")
            if lock.answer is None:
                if "placeholder-200" in self.flaws:
                    return Resp(200, {}, dict(REPLAY))
                return error(423, "a request with this key is still running")
            return Resp(lock.answer.status, lock.answer.body, {**lock.answer.headers, **REPLAY})
        lock = self.locks[slot] = Lock(fp, self.clock.now())
        if "cache-5xx" in self.flaws:
            return await self.cache_everything(req, tenant, key, body, lock)
        try:
            answer = await self.transfer(req, body)
        except Exception:
            answer = error(500, "the transfer failed; retry")
        if answer.status >= 500:
            del self.locks[slot]  # released: the retry runs the request again
            return answer
        self.store(tenant, key, lock, answer)
        return answer

    def store(self, tenant: str, key: str, lock: Lock, answer: Resp) -> None:
        """The ledger row and the stored answer, with no await in between."""
        if answer.status == 201:
            self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
        lock.answer = answer

    async def cache_everything(self, req: Req, tenant: str, key: str, body: Any,
                               lock: Lock) -> Resp:
        """FLAW cache-5xx: the outcome is cached in a ``finally``, whatever it is, under the
        fingerprint read back from the finished handler, which an exception leaves empty."""
        answer, seen = error(500, "the transfer failed; retry"), ""
        try:
            answer = await self.transfer(req, body)
            seen = lock.fp
        finally:
            lock.fp = seen
            self.store(tenant, key, lock, answer)
        return answer

    async def transfer(self, req: Req, body: Any) -> Resp:
        """The operation (a 10 ms bank call); records nothing."""
        await pause(req.headers.get("x-test-delay-ms"))
        fault = req.headers.get("x-test-fault")
        if fault == "raise":
            raise RuntimeError("injected handler error")
        if fault == "answer-503":
            return error(503, "the bank did not answer")
        if not valid_amount(body):
            return error(400, "amount must be a positive integer")
        await asyncio.sleep(0.01)
        rid = "tr_" + secrets.token_hex(6)
        return Resp(201, {"id": rid, "amount": body["amount"]},
                    {"Location": f"/api/transfers/{rid}"})


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_asgi(Service(args.flaws).handle, args.host, args.port)

"""Lax mode, and an effects endpoint that only knows totals for requests without a key.

Choices: a request without an Idempotency-Key is processed like any request without
protection (lax mode, as most middleware libraries do); the ledger can be asked about one key,
but charges made without a key can only be counted as a grand total of every charge
(``GET /admin/charges/total``), so the harness must measure keyless charges as a difference.
State per process, standard library ThreadingHTTPServer, one lock around claim and commit.

Flaws: ``keyless-twice`` charges a keyless request twice (a retry loop around the provider
call that ignores the first success); ``truncate-16`` stores keys in a 16-character column,
so long keys that share a prefix collide.
"""

from __future__ import annotations

import json
import threading
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
    provide,
    read_keyed,
    serve_stdlib,
    stall,
)

RETENTION = 24 * 3600.0
FLAWS = ("keyless-twice", "truncate-16")


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.lock = threading.Lock()
        # (tenant, key) -> (fingerprint, created, answer or None while running)
        self.table: dict[tuple[str, str], tuple[str, float, Resp | None]] = {}

    def handle(self, req: Req) -> Resp:
        if req.path == "/charges":
            return self.charge(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/up":
            return Resp(200, {"ok": True})
        if req.path == "/admin/charges" and "key" in req.query:
            return self.ledger.answer(req.query)
        if req.path == "/admin/charges/total":
            return Resp(200, {"total": len(self.ledger.rows)})
        if req.path == "/admin/clock" and req.method == "POST":
            self.clock.advance(float(json.loads(req.body)["seconds"]))
            return Resp(200, {})
        if req.path == "/admin/keys":
            with self.lock:
                self._expire()
                return Resp(200, {"rows": len(self.table),
                                  "running": sum(v[2] is None for v in self.table.values())})
        return error(404, "no such route")

    def _expire(self) -> None:
        drop_expired(self.table, self.clock.now() - RETENTION, lambda v: v[1])

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=128, required=None)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        if key is None:  # lax: no protection asked for, none given
            answer = self.execute(req, tenant, None, body)
            if "keyless-twice" in self.flaws and answer.status == 201:
                self.execute(req, tenant, None, body)
            return answer
        slot = (tenant, key[:16] if "truncate-16" in self.flaws else key)
        fp = fingerprint(req.method, req.target, body)
        with self.lock:
            self._expire()
            found = self.table.get(slot)
            if found is None:
                self.table[slot] = (fp, self.clock.now(), None)
            elif found[0] != fp:
                return error(422, "key reused with a different request")
            elif found[2] is None:
                return error(409, "in progress", **{"Retry-After": "1"})
            else:
                return Resp(found[2].status, found[2].body,
                            {**found[2].headers, "Idempotent-Replayed": "true"})
        try:
            return self.execute(req, tenant, key, body, slot)
        except Exception:
            with self.lock:
                self.table.pop(slot, None)
            return error(500, "charge failed; retry")

    def execute(self, req: Req, tenant: str, key: str | None, body: Any,
                slot: tuple[str, str] | None = None) -> Resp:
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "handler-error":
            raise RuntimeError("injected handler error")
        answer = provide(body, "ch", "/charges")
        with self.lock:
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
            if slot is not None:
                self.table[slot] = (self.table[slot][0], self.table[slot][1], answer)
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_stdlib(Service(args.flaws).handle, args.host, args.port)

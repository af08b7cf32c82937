"""No tenants, and a clock hook that takes its argument in the query string.

Choices: one global key space (a single-tenant internal service: no Authorization header at
all); the test clock is moved with ``POST /admin/clock?seconds=N`` and no body; expired keys
are purged by an explicit cleanup pass (``POST /admin/cleanup``, what a cron job would call)
as well as on every claim.  State per process; standard library ThreadingHTTPServer.

Flaws: ``stuck-on-error`` leaves the key in progress for ever when the handler raises (no
release, no lease); ``no-cleanup`` never deletes expired keys (they are only ignored on read),
so the key table grows without bound.
"""

from __future__ import annotations

import threading
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
    provide,
    read_keyed,
    serve_stdlib,
    stall,
)

RETENTION = 24 * 3600.0
FLAWS = ("stuck-on-error", "no-cleanup")


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.mutex = threading.Lock()
        self.slots: dict[str, Record] = {}

    def handle(self, req: Req) -> Resp:
        if req.path == "/orders":
            return self.order(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/":
            return Resp(200, {"ok": True})
        if req.path == "/admin/effects":
            return self.ledger.answer(req.query)
        with self.mutex:
            if req.path == "/admin/clock" and req.method == "POST":
                self.clock.advance(float(req.query["seconds"]))
                return Resp(200, {"now": self.clock.now()})
            if req.path == "/admin/cleanup" and req.method == "POST":
                return Resp(200, {"deleted": self.purge()})
            if req.path == "/admin/keys":
                running = sum(s.answer is None for s in self.slots.values())
                return Resp(200, {"rows": len(self.slots), "in_progress": running})
        return error(404, "no such route")

    def expired(self, slot: Record) -> bool:
        return slot.created <= self.clock.now() - RETENTION

    def purge(self) -> int:  # with the mutex held
        if "no-cleanup" in self.flaws:
            return 0
        return drop_expired(self.slots, self.clock.now() - RETENTION, lambda s: s.created)

    def order(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=200)  # no tenants: any Authorization is ignored
        if isinstance(got, Resp):
            return got
        key, body = got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        with self.mutex:
            self.purge()
            slot = self.slots.get(key)
            if slot is None or self.expired(slot):
                slot = self.slots[key] = Record(fp, self.clock.now())
            elif slot.fp != fp:
                return error(422, "this key was used for a different order")
            elif slot.answer is None:
                return error(409, "in progress", **{"Retry-After": "1"})
            else:
                return Resp(slot.answer.status, slot.answer.body,
                            {**slot.answer.headers, "Idempotent-Replayed": "true"})
        try:
            return self.place(req, key, body, slot)
        except Exception:
            if "stuck-on-error" not in self.flaws:
                with self.mutex:
                    if self.slots.get(key) is slot:
                        del self.slots[key]
            return error(500, "the order failed; retry")

    def place(self, req: Req, key: str, body: Any, slot: Record) -> Resp:
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "handler-error":
            raise RuntimeError("injected handler error")
        answer = provide(body, "or", "/orders")  # the warehouse
        with self.mutex:
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": None, "key": key})
            slot.answer = answer
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_stdlib(Service(args.flaws).handle, args.host, args.port)

"""A retry of an in-flight key waits for the original instead of being told 409.

Choices: an in-flight retry long-polls up to 5 s on a condition variable and then gets the
original's stored answer (only after 5 s does it get 503 with Retry-After); a key reused with
another request gets 409 Conflict (the status many frameworks use for "this key means
something else"), not the draft's 422; replays carry no marker header at all, since a faithful
replay is indistinguishable from the original by design.  State is per process (a dict and a
lock), served by the standard library's ThreadingHTTPServer.

Flaws: ``no-fingerprint`` stores the key without the request's fingerprint (a reuse gets the
original's answer); ``case-insensitive`` folds keys to lower case (distinct keys collide).
"""

from __future__ import annotations

import json
import threading
import time
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
WAIT = 5.0
FLAWS = ("no-fingerprint", "case-insensitive")


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.records: dict[tuple[str, str], Record] = {}
        self.changed = threading.Condition()

    def handle(self, req: Req) -> Resp:
        if req.path == "/v1/charges":
            return self.charge(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/ping":
            return Resp(200, {"ok": True})
        if req.path == "/debug/ledger":
            return self.ledger.answer(req.query)
        with self.changed:
            if req.path == "/debug/clock" and req.method == "POST":
                self.clock.advance(float(json.loads(req.body)["seconds"]))
                self._expire()
                return Resp(200, {"now": self.clock.now()})
            if req.path == "/debug/keys":
                self._expire()
                running = sum(r.answer is None for r in self.records.values())
                return Resp(200, {"rows": len(self.records), "in_progress": running})
        return error(404, "no such route")

    def _expire(self) -> None:  # call with the lock held
        drop_expired(self.records, self.clock.now() - RETENTION, lambda r: r.created)

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=64)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        fp = "-" if "no-fingerprint" in self.flaws else fingerprint(req.method, req.target, body)
        slot = (tenant, key.lower() if "case-insensitive" in self.flaws else key)
        deadline = time.monotonic() + WAIT
        with self.changed:
            self._expire()
            record = self.records.get(slot)
            if record is None:
                record = self.records[slot] = Record(fp, self.clock.now())
            elif record.fp != fp:
                return error(409, "this key belongs to another request")
            else:
                while record.answer is None and self.records.get(slot) is record:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return error(503, "still in progress", **{"Retry-After": "1"})
                    self.changed.wait(left)
                if record.answer is None:  # the original failed and released the key
                    return error(503, "the original failed; retry", **{"Retry-After": "0"})
                return record.answer
        try:
            answer = self.work(req, tenant, key, body, record)
        except Exception:
            with self.changed:
                if self.records.get(slot) is record:
                    del self.records[slot]
                self.changed.notify_all()
            return error(500, "the charge failed; retry")
        return answer

    def work(self, req: Req, tenant: str, key: str, body: Any, record: Record) -> Resp:
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "raise":
            raise RuntimeError("injected handler error")
        answer = provide(body, "ch", "/v1/charges")
        with self.changed:  # the effect and the stored answer together
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
            record.answer = answer
            self.changed.notify_all()
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_stdlib(Service(args.flaws).handle, args.host, args.port)

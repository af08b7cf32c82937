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
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from tests.corpus.services._kit import (
    Clock,
    Invalid,
    Ledger,
    Req,
    Resp,
    arguments,
    canonical,
    error,
    fingerprint,
    parse_key,
    serve_stdlib,
    stall,
    tenant_of,
    valid_amount,
)

RETENTION = 24 * 3600.0
WAIT = 5.0
FLAWS = ("no-fingerprint", "case-insensitive")


@dataclass
class Record:
    fp: str
    created: float
    answer: Resp | None = None


class Service:
    def __init__(self, flaw: str | None) -> None:
        self.flaw = flaw
        self.clock = Clock()
        self.ledger = Ledger()
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
        horizon = self.clock.now() - RETENTION
        for slot in [s for s, r in self.records.items() if r.created <= horizon]:
            del self.records[slot]

    def charge(self, req: Req) -> Resp:
        tenant = tenant_of(req) or "-"
        try:
            key = parse_key(req.headers.get("idempotency-key"), max_length=64)
        except Invalid as exc:
            return error(400, str(exc))
        if key is None:
            return error(400, "Idempotency-Key is required")
        if req.too_large:
            return error(413, "body too large")
        try:
            body = canonical(req.body)
        except ValueError:
            return error(400, "the body must be JSON")
        fp = "-" if self.flaw == "no-fingerprint" else fingerprint(req.method, req.target, body)
        slot = (tenant, key.lower() if self.flaw == "case-insensitive" else key)
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
        if not valid_amount(body):
            answer = error(400, "amount must be a positive integer")
        else:
            time.sleep(0.01)  # the payment provider
            charge_id = "ch_" + secrets.token_hex(6)
            answer = Resp(201, {"id": charge_id, "amount": body["amount"]},
                          {"Location": f"/v1/charges/{charge_id}"})
        with self.changed:  # the effect and the stored answer together
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
            record.answer = answer
            self.changed.notify_all()
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_stdlib(Service(args.flaw).handle, args.host, args.port)

"""Errors are stored like successes, as Stripe does once execution has begun.

Choices: when the handler fails after the key is claimed, the 500 is stored and replayed to
every retry with that key for the whole retention (the client must use a new key to try
again); nothing is charged when it fails, because the charge is appended only together with the
stored answer.  Replays carry ``Idempotent-Replayed: true``.  Keys are plain tokens of at most
40 characters matching ``[A-Za-z0-9_-]+`` (a UUID fits), refused with 400 otherwise.  State per
process; standard library ThreadingHTTPServer; one lock per key plus one for the table.

Flaws: ``drop-location`` stores only status and body, so replays lose the Location header;
``charge-before-fault`` calls the provider before the step that can fail, and stores the 500
while the charge stays.
"""

from __future__ import annotations

import json
import re
import secrets
import threading
import time
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
    read_keyed,
    serve_stdlib,
    stall,
    valid_amount,
)

RETENTION = 24 * 3600.0
KEY = re.compile(r"[A-Za-z0-9_-]{1,40}")
FLAWS = ("drop-location", "charge-before-fault")


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.guard = threading.Lock()
        self.store: dict[tuple[str, str], dict[str, Any]] = {}

    def handle(self, req: Req) -> Resp:
        if req.path == "/charges":
            return self.charge(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/livez":
            return Resp(200, {"ok": True})
        if req.path == "/internal/ledger":
            return self.ledger.answer(req.query)
        if req.path == "/internal/clock" and req.method == "POST":
            self.clock.advance(float(json.loads(req.body)["seconds"]))
            return Resp(200, {})
        if req.path == "/internal/keys":
            with self.guard:
                self.sweep()
                running = sum(1 for e in self.store.values() if e["answer"] is None)
                return Resp(200, {"rows": len(self.store), "in_progress": running})
        return error(404, "no such route")

    def sweep(self) -> None:
        drop_expired(self.store, self.clock.now() - RETENTION, lambda e: e["created"])

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=40, pattern=KEY,
                         pattern_error="keys are 1 to 40 of A-Z a-z 0-9 _ -")
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        with self.guard:
            self.sweep()
            entry = self.store.get((tenant, key))
            if entry is None:
                entry = self.store[(tenant, key)] = {"fp": fp, "created": self.clock.now(),
                                                     "answer": None}
                owner = True
            else:
                owner = False
        if not owner:
            if entry["fp"] != fp:
                return error(422, "key reused with a different request")
            stored: Resp | None = entry["answer"]
            if stored is None:
                return error(409, "in progress", **{"Retry-After": "1"})
            return Resp(stored.status, stored.body, {**stored.headers,
                                                     "Idempotent-Replayed": "true"})
        return self.execute(req, tenant, key, body, entry)

    def execute(self, req: Req, tenant: str, key: str, body: Any,
                entry: dict[str, Any]) -> Resp:
        charged: str | None = None
        try:
            stall(req.headers.get("x-test-delay-ms"))
            if "charge-before-fault" in self.flaws and valid_amount(body):
                charged = "ch_" + secrets.token_hex(6)
                self.ledger.add({"id": charged, "tenant": tenant, "key": key})
            if req.headers.get("x-test-fault") == "fail":
                raise RuntimeError("injected handler error")
            if not valid_amount(body):
                answer = error(400, "amount must be a positive integer")
            else:
                time.sleep(0.01)  # the payment provider
                charge = charged or "ch_" + secrets.token_hex(6)
                answer = Resp(201, {"id": charge, "amount": body["amount"]},
                              {"Location": f"/charges/{charge}"})
        except Exception:
            answer = error(500, "the charge failed")  # stored: execution had begun
        stored = Resp(answer.status, answer.body,
                      {} if "drop-location" in self.flaws else dict(answer.headers))
        with self.guard:
            if answer.status == 201 and charged is None:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
            entry["answer"] = stored
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_stdlib(Service(args.flaws).handle, args.host, args.port)

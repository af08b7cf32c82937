"""A service with one worker: requests are served one at a time, as by a sync framework run with
a single worker (gunicorn's default, Flask's development server).

Choices: connections are accepted by the standard library's ThreadingHTTPServer, but a handler
runs only while it holds the one worker, so two requests never run at the same time.  The
idempotency layer is still complete: a key claimed and not finished gets 409 with Retry-After
(which one worker never shows, though a second would), a reused key 422, a replay carries
``Idempotent-Replayed: true``, a failing handler frees its key.  There is no slow hook, so
nothing can hold a request for a retry to meet: copies sent at once are all answered 2xx, the
first charged and the others replayed, each having waited for the worker and not for the
original (issue 38: probe must not read that as ``in_progress = "wait"``).  State is per
process; keys expire after 24 h, with no clock to move.

Flaw: ``replay-200`` replays a 201 as 200 (P3).
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
)

RETENTION = 24 * 3600.0
FLAWS = ("replay-200",)


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.records: dict[tuple[str, str], Record] = {}
        self.lock = threading.Lock()  # the key table's
        self.worker = threading.Lock()  # the one worker: a request runs only while it holds it

    def handle(self, req: Req) -> Resp:
        with self.worker:
            return self.serve(req)

    def serve(self, req: Req) -> Resp:
        if req.path == "/charges":
            return self.charge(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/health":
            return Resp(200, {"ok": True})
        if req.path == "/effects":
            return self.ledger.answer(req.query)
        if req.path == "/keys":
            with self.lock:
                self._expire()
                running = sum(r.answer is None for r in self.records.values())
                return Resp(200, {"rows": len(self.records), "in_progress": running})
        return error(404, "no such route")

    def _expire(self) -> None:  # call with the lock held
        drop_expired(self.records, self.clock.now() - RETENTION, lambda r: r.created)

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        slot = (tenant, key)
        with self.lock:
            self._expire()
            record = self.records.get(slot)
            if record is None:
                record = self.records[slot] = Record(fp, self.clock.now())
            elif record.fp != fp:
                return error(422, "this key belongs to another request")
            elif record.answer is None:
                return error(409, "a request with this key is in progress",
                             **{"Retry-After": "1"})
            else:
                return self.replay(record.answer)
        try:
            answer = self.work(req, tenant, key, body, record)
        except Exception:
            with self.lock:
                if self.records.get(slot) is record:
                    del self.records[slot]
            return error(500, "the charge failed; retry")
        return answer

    def work(self, req: Req, tenant: str, key: str, body: Any, record: Record) -> Resp:
        if req.headers.get("x-test-fault") == "raise":
            raise RuntimeError("injected handler error")
        answer = provide(body, "ch", "/charges")
        with self.lock:  # the effect and the stored answer together
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
            record.answer = answer
        return answer

    def replay(self, answer: Resp) -> Resp:
        status = 200 if "replay-200" in self.flaws and answer.status == 201 else answer.status
        return Resp(status, answer.body, {**answer.headers, "Idempotent-Replayed": "true"})


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_stdlib(Service(args.flaws).handle, args.host, args.port)

"""A service with one broken promise, chosen by ``--flaw``, for the probe's tests.

Choices: a key's fingerprint is method, path and body (the query string is not part of the
request); a reused key gets 422; a retry of a running request gets 409 with ``Retry-After``;
replays carry ``Idempotent-Replayed: true``.  State is per process, served by the standard
library's ThreadingHTTPServer.

Flaws: ``no-retry-after`` answers 409 without ``Retry-After``; ``refingerprint`` stores the
fingerprint of a reused key's request over the original's, so the original itself is refused
afterwards; ``wait`` holds a retry of a running request until the original is done and answers
it the replay.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection

from tests.corpus.services._kit import (
    InMemory,
    Record,
    Req,
    Resp,
    arguments,
    error,
    fingerprint,
    provide,
    read_keyed,
    serve_stdlib,
    stall,
)

FLAWS = ("no-retry-after", "refingerprint", "wait")
WAIT = 5.0


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.records: dict[tuple[str, str], Record] = {}
        self.changed = threading.Condition()

    def handle(self, req: Req) -> Resp:
        if req.path == "/charges" and req.method == "POST":
            return self.charge(req)
        if req.path == "/health":
            return Resp(200, {"ok": True})
        if req.path == "/effects":
            return self.ledger.answer(req.query)
        if req.path == "/keys":
            with self.changed:
                running = sum(r.answer is None for r in self.records.values())
                return Resp(200, {"rows": len(self.records), "in_progress": running})
        return error(404, "no such route")

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        fp = fingerprint(req.method, req.path, body)  # the query string is not hashed
        slot = (tenant, key)
        with self.changed:
            record = self.records.get(slot)
            if record is None:
                record = self.records[slot] = Record(fp, self.clock.now())
            elif record.fp != fp:
                if "refingerprint" in self.flaws:
                    record.fp = fp
                return error(422, "this key belongs to another request")
            elif record.answer is None and "wait" in self.flaws:
                deadline = time.monotonic() + WAIT
                while record.answer is None and time.monotonic() < deadline:
                    self.changed.wait(deadline - time.monotonic())
                if record.answer is None:
                    return error(409, "still in progress", **{"Retry-After": "1"})
                return self.replay(record.answer)
            elif record.answer is None:
                headers = {} if "no-retry-after" in self.flaws else {"Retry-After": "1"}
                return error(409, "a request with this key is in progress", **headers)
            else:
                return self.replay(record.answer)
        stall(req.headers.get("x-test-delay-ms"))
        answer = provide(body, "ch", "/charges")
        with self.changed:  # the effect and the stored answer together
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": key})
            record.answer = answer
            self.changed.notify_all()
        return answer

    @staticmethod
    def replay(answer: Resp) -> Resp:
        return Resp(answer.status, answer.body, {**answer.headers, "Idempotent-Replayed": "true"})


if __name__ == "__main__":
    args = arguments(FLAWS)
    serve_stdlib(Service(args.flaws).handle, args.host, args.port)

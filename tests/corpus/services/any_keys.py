"""Keys of any value a header can carry, kept as the octets that were sent.

Choices: the key has no syntax rule and no length limit; only an empty one is refused (400).
Non-ASCII keys, control characters, spaces inside: all are keys.  http.server decodes header
octets as latin-1, so the service encodes the value back to get the octets the client sent and
keys its tables by those; the ledger records the key as those octets read as UTF-8, so a key
sent as UTF-8 is found under its own spelling.  Two tables, as some libraries keep them: the
claims (tenant, key) -> fingerprint and state, and a replay cache (tenant, key, fingerprint)
-> answer.  A claim still running is never swept, only finished ones older than the
retention.  State per process; the standard library's ThreadingHTTPServer; one lock.

Flaws: ``tenant-replay`` keys the replay cache by key and fingerprint only, so another tenant
sending the same key and the same body gets the first tenant's answer; ``stuck-in-progress``
writes the completion under the key's text instead of its octets, another row than the claim,
so the original is answered but every retry finds the claim running, for ever.  The two cannot
be switched on at once (``CANNOT_COMBINE``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Collection
from dataclasses import dataclass

from tests.corpus.services._kit import (
    InMemory,
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

RETENTION = 24 * 3600.0
FLAWS = ("tenant-replay", "stuck-in-progress")
CANNOT_COMBINE = {
    frozenset(FLAWS): "stuck-in-progress caches every answer under the key's text, which no "
                      "look-up by its octets finds, so tenant-replay (the cache answering "
                      "another tenant) can never show",
}
Row = tuple[str, bytes | str]


@dataclass
class Claim:
    fp: str
    created: float
    done: bool = False


class Service(InMemory):
    def __init__(self, flaws: Collection[str]) -> None:
        super().__init__(flaws)
        self.lock = threading.Lock()
        self.claims: dict[Row, Claim] = {}
        self.replays: dict[tuple[str | None, bytes | str, str], tuple[float, Resp]] = {}

    def handle(self, req: Req) -> Resp:
        if req.path == "/v1/charges":
            return self.charge(req) if req.method == "POST" else error(405, "POST only")
        if req.path == "/ping":
            return Resp(200, {"ok": True})
        if req.path == "/debug/effects":
            return self.ledger.answer(req.query)
        if req.path == "/debug/clock" and req.method == "PUT":
            self.clock.advance(float(json.loads(req.body)["advance"]))
            return Resp(200, {"now": self.clock.now()})
        if req.path == "/debug/keys":
            with self.lock:
                self.sweep()
                running = sum(1 for c in self.claims.values() if not c.done)
                return Resp(200, {"rows": len(self.claims), "in_progress": running})
        return error(404, "no such route")

    def sweep(self) -> None:
        """Forget finished claims and cached answers older than the retention (caller holds
        the lock).  A claim whose request still runs stays: its request is not over."""
        horizon = self.clock.now() - RETENTION
        for row in [r for r, c in self.claims.items() if c.done and c.created <= horizon]:
            del self.claims[row]
        for slot in [s for s, (created, _) in self.replays.items() if created <= horizon]:
            del self.replays[slot]

    def cached(self, tenant: str, key: bytes | str, fp: str
               ) -> tuple[str | None, bytes | str, str]:
        """The replay cache's slot for an answer."""
        return (None if "tenant-replay" in self.flaws else tenant, key, fp)

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req, syntax="any", max_length=0)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key.encode("latin-1"), got.body
        fp = fingerprint(req.method, req.target, body)
        with self.lock:
            self.sweep()
            hit = self.replays.get(self.cached(tenant, key, fp))
            if hit is not None:
                answer = hit[1]
                return Resp(answer.status, answer.body,
                            {**answer.headers, "Idempotent-Replayed": "true"})
            claim = self.claims.get((tenant, key))
            if claim is not None:
                if claim.fp != fp:
                    return error(422, "this key was sent with another request")
                return error(409, "a request with this key is in progress",
                             **{"Retry-After": "1"})
            self.claims[(tenant, key)] = Claim(fp, self.clock.now())
        try:
            stall(req.headers.get("x-test-delay-ms"))
            if req.headers.get("x-test-fault") == "raise":
                raise RuntimeError("injected handler error")
            answer = provide(body, "ch", "/v1/charges")
        except Exception:
            with self.lock:  # release: the retry runs the request again
                del self.claims[(tenant, key)]
            return error(500, "the charge failed; retry")
        self.finish(tenant, key, fp, answer)
        return answer

    def finish(self, tenant: str, key: bytes, fp: str, answer: Resp) -> None:
        """The ledger row and the stored answer, under one lock."""
        text = key.decode("utf-8", "surrogateescape")
        row: bytes | str = text if "stuck-in-progress" in self.flaws else key
        with self.lock:
            if answer.status == 201:
                self.ledger.add({"id": answer.body["id"], "tenant": tenant, "key": text})
            claim = self.claims.setdefault((tenant, row), Claim(fp, self.clock.now()))
            claim.done = True
            self.replays[self.cached(tenant, row, fp)] = (claim.created, answer)


if __name__ == "__main__":
    args = arguments(FLAWS, cannot_combine=CANNOT_COMBINE)
    serve_stdlib(Service(args.flaws).handle, args.host, args.port)

"""Keys in Redis with whole-second expiry, and a handler's errors stored or released.

Choices: the service starts its own ``redis-server`` (Debian's, append-only, fsync on every
write) on the port it is given, as its child, and reaches it through the address it is given
(the harness's store proxy, which reads RESP).  A key's record ``idem:rec:[tenant, key]`` is a
JSON string: the fingerprint, the claim's token and lease, and once done the answer.  Its
expiry is set once, when the key is first claimed, with ``EXPIREAT`` at the whole second the
24 h retention ends in, rounded up (``ceil``): a record outlives the retention by up to a second,
as with any whole-second ``EXPIRE``/``SETEX``, and Redis removes it then (issue 38: no P11 for
that second).  Writing the answer keeps that expiry (``SET ... KEEPTTL``).  The claim, the
commit (the ledger entry and the stored answer together, only while this claim's token holds
the key) and the release are one Lua script each (``EVALSHA``).  A claim left by a dead or cut
request is taken over after a 30 s lease.  ``--errors store`` stores a failing handler's 500
as the key's answer and replays it; ``--errors release`` (the default) frees the key.  A store
error is let through to the framework, which answers 500 (the store failed, not the handler:
nothing is stored, and the key's lease frees it later).  There is no test clock: the harness
moves the service's and its Redis's clocks from outside (libfaketime), so Redis's expiry moves
too.  No statistics route: the key table's size is what Redis holds.

Flaws: ``set-drops-ttl`` writes the answer with a plain ``SET``, which drops the key's expiry:
a finished key is never forgotten (P11); ``split-commit`` pushes the ledger entry as a command
of its own before the commit script: a cut between the two leaves a charge under a key still
claimed, and the retry that takes the key over after the lease charges again (P1).
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import subprocess
import time
from collections.abc import Collection
from contextlib import suppress
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.corpus.services._kit import (
    Req,
    Resp,
    error,
    fingerprint,
    provide,
    read_keyed,
    serve_stdlib,
    stall,
)

RETENTION = 24 * 3600
LEASE = 30.0
FLAWS = ("set-drops-ttl", "split-commit")

#: KEYS[1] the record; ARGV fingerprint, token, now, lease, the whole second the retention
#: ends in.  Answers {"won"}, {"mismatch"}, {"busy"} or {"done", record}.
CLAIM = """
local raw = redis.call('GET', KEYS[1])
local now = tonumber(ARGV[3])
if raw then
  local rec = cjson.decode(raw)
  if rec.fp ~= ARGV[1] then return {'mismatch'} end
  if rec.status then return {'done', raw} end
  if rec.leased_until > now then return {'busy'} end
  rec.token = ARGV[2]
  rec.leased_until = now + tonumber(ARGV[4])
  redis.call('SET', KEYS[1], cjson.encode(rec), 'KEEPTTL')
  return {'won'}
end
local rec = {fp = ARGV[1], token = ARGV[2], leased_until = now + tonumber(ARGV[4])}
redis.call('SET', KEYS[1], cjson.encode(rec), 'EXAT', ARGV[5])
return {'won'}
"""
#: KEYS[1] the record, KEYS[2] the ledger; ARGV token, the answer (JSON), the charge ('' for
#: none), '1' to keep the expiry.  Answers {"stored"}, {"done", record} or {"taken"}.
COMMIT = """
local raw = redis.call('GET', KEYS[1])
if not raw then return {'taken'} end
local rec = cjson.decode(raw)
if rec.token ~= ARGV[1] then
  if rec.status then return {'done', raw} end
  return {'taken'}
end
if ARGV[3] ~= '' then redis.call('RPUSH', KEYS[2], ARGV[3]) end
local answer = cjson.decode(ARGV[2])
answer.fp = rec.fp
if ARGV[4] == '1' then redis.call('SET', KEYS[1], cjson.encode(answer), 'KEEPTTL')
else redis.call('SET', KEYS[1], cjson.encode(answer)) end
return {'stored'}
"""
#: KEYS[1] the record; ARGV token.  Frees a key this claim still holds, with no answer.
RELEASE = """
local raw = redis.call('GET', KEYS[1])
if raw then
  local rec = cjson.decode(raw)
  if rec.token == ARGV[1] and not rec.status then return redis.call('DEL', KEYS[1]) end
end
return 0
"""


def names(tenant: str | None, key: str | None) -> tuple[str, str]:
    """The record and the ledger of (tenant, key)."""
    slot = json.dumps([tenant or "", key])
    return f"idem:rec:{slot}", f"ledger:{slot}"


def whole_second(moment: float) -> int:
    """The whole second ``moment`` falls in, rounded up: what an ``EXPIREAT`` can say."""
    return math.ceil(moment)


class Service:
    def __init__(self, via: redis.Redis, direct: redis.Redis, flaws: Collection[str],
                 errors: str) -> None:
        self.via, self.direct, self.flaws, self.errors = via, direct, frozenset(flaws), errors
        self.claim = via.register_script(CLAIM)
        self.commit = via.register_script(COMMIT)
        self.release = via.register_script(RELEASE)

    def handle(self, req: Req) -> Resp:
        if req.path == "/charges":
            if req.method != "POST":
                return error(405, "POST only")
            return self.charge(req)  # a store error goes to the framework: 500
        if req.path == "/health":
            return Resp(200, {"ok": True})
        if req.path == "/test/effects":  # read straight from Redis, not through the proxy
            ledger = names(req.query.get("tenant"), req.query.get("key"))[1]
            ids = [i.decode() for i in self.direct.lrange(ledger, 0, -1)]
            return Resp(200, {"count": len(ids), "ids": ids})
        return error(404, "no such route")

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=255)
        if isinstance(got, Resp):
            return got
        record, ledger = names(got.tenant, got.key)
        fp = fingerprint(req.method, req.target, got.body)
        token, now = secrets.token_hex(8), time.time()
        verdict, *stored = self.claim(keys=[record],
                                      args=[fp, token, now, LEASE, whole_second(now + RETENTION)])
        if verdict == b"mismatch":
            return error(422, "this key was used with another request")
        if verdict == b"done":
            return replay(stored[0])
        if verdict == b"busy":
            return error(409, "a request with this key is in progress", **{"Retry-After": "1"})
        try:
            answer = self.perform(req, got.body)
        except Exception:
            if self.errors == "release":
                with suppress(redis.RedisError):  # if not now, the lease frees the key later
                    self.release(keys=[record], args=[token])
                return error(500, "the charge failed; retry")
            answer = error(500, "the charge failed")
        return self.finish(record, ledger, token, answer)

    def perform(self, req: Req, body: Any) -> Resp:
        """The charge itself (a 10 ms payment provider); records nothing."""
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "fail":
            raise RuntimeError("injected handler error")
        return provide(body, "ch", "/charges")

    def finish(self, record: str, ledger: str, token: str, answer: Resp) -> Resp:
        charge = answer.body["id"] if answer.status == 201 else ""
        stored = json.dumps({"status": answer.status, "body": answer.body,
                             "location": answer.headers.get("Location")})
        if "split-commit" in self.flaws and charge:
            self.via.rpush(ledger, charge)  # FLAW: the charge committed on its own
            charge = ""
        keep = "0" if "set-drops-ttl" in self.flaws else "1"  # FLAW: a plain SET drops the TTL
        verdict, *won = self.commit(keys=[record, ledger], args=[token, stored, charge, keep])
        if verdict == b"done":  # a retry took over and finished first: its answer stands
            return replay(won[0])
        if verdict == b"taken":
            return error(409, "this request lost its claim on the key", **{"Retry-After": "1"})
        return answer


def replay(raw: bytes) -> Resp:
    record = json.loads(raw)
    headers = {"Idempotent-Replayed": "true"}
    if record.get("location"):
        headers["Location"] = record["location"]
    return Resp(record["status"], record["body"], headers)


def client(address: str) -> redis.Redis:
    """A client that reports a store error at once (no retries of its own: a retried script
    could run twice)."""
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=2, socket_connect_timeout=1,
                       retry=Retry(NoBackoff(), 0))


def start_redis(port: int, directory: Path) -> None:
    """Start redis-server as this process's child unless one answers on ``port``; return once
    it answers."""
    probe = client(f"127.0.0.1:{port}")
    with suppress(redis.ConnectionError):
        probe.ping()
        return
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "redis.log").open("ab") as log:
        subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                          "--dir", str(directory), "--appendonly", "yes",
                          "--appendfsync", "always", "--save", ""],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while True:
        try:
            probe.ping()
            return
        except (redis.ConnectionError, redis.BusyLoadingError):
            if time.monotonic() > deadline:
                raise SystemExit(f"redis-server did not answer on port {port}; see "
                                 f"{directory / 'redis.log'}") from None
            time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flaw", dest="flaws", action="append", choices=FLAWS, default=[],
                        help="switch a named flaw on; repeat it for both")
    parser.add_argument("--errors", choices=["release", "store"], default="release",
                        help="a failing handler: free the key, or store its 500 and replay it")
    parser.add_argument("--redis-port", type=int, required=True,
                        help="the port redis-server listens on (started here when none answers)")
    parser.add_argument("--redis-via", required=True,
                        help="host:port through which the service reaches that Redis")
    parser.add_argument("--redis-dir", type=Path, required=True, help="Redis's data directory")
    args = parser.parse_args()
    start_redis(args.redis_port, args.redis_dir)
    service = Service(client(args.redis_via), client(f"127.0.0.1:{args.redis_port}"),
                      args.flaws, args.errors)
    serve_stdlib(service.handle, args.host, args.port)


if __name__ == "__main__":
    main()

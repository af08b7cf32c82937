"""Keys kept in a real Redis, with Redis's own TTLs for the retention and the lease.

Choices: the service starts its own ``redis-server`` (Debian's) on the port it is given, unless
one already answers there, in its own process group so it lives and dies with the service; the
data is on disk (append-only file, fsync on every write), so a restarted service finds every
key Redis acknowledged.  The service talks to Redis through the address it is given (a proxy,
in a test).  A key's record ``idem:rec:[tenant, key]`` holds the fingerprint and, once done,
the answer, with a TTL of the 24 h retention set when the key is first claimed; the lock
``idem:lock:[tenant, key]`` holds the claim's token with a 30 s TTL, the lease.  Claiming,
committing (the ledger entry and the stored answer together, only while this claim still holds
the key or nobody took it over) and releasing are each one Lua script, so each is atomic.
There is no statistics route: the key table's size is what Redis holds.  A store error answers
503 with Retry-After.  The service has no clock of its own to move: Redis's TTLs are the clock.

Flaws: ``no-ttl`` stores records without a TTL, so keys are never forgotten;
``lost-lock-empty-fingerprint`` reads the fingerprint back from the lock when committing, so a
request that outlived its lock (no one took over) stores an empty fingerprint and every
identical retry is told the key belongs to another request.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import time
from collections.abc import Collection
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
    read_keyed,
    serve_stdlib,
    stall,
    valid_amount,
)

RETENTION = 24 * 3600
LEASE_MS = 30_000
FLAWS = ("no-ttl", "lost-lock-empty-fingerprint")
RETRY = {"Retry-After": "1"}

CLAIM = """
local rec = redis.call('GET', KEYS[1])
if rec then
  local r = cjson.decode(rec)
  if r.fp ~= ARGV[1] then return {'mismatch'} end
  if r.status then return {'done', rec} end
end
if not redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3]) then return {'busy'} end
if not rec then
  local fresh = cjson.encode({fp = ARGV[1]})
  if ARGV[4] == '0' then redis.call('SET', KEYS[1], fresh)
  else redis.call('SET', KEYS[1], fresh, 'EX', ARGV[4]) end
end
return {'claimed'}
"""

COMMIT = """
local holder = redis.call('GET', KEYS[2])
local rec = redis.call('GET', KEYS[1])
if holder ~= ARGV[1] then
  if holder then return {'taken'} end
  if rec and cjson.decode(rec).status then return {'done', rec} end
end
if ARGV[3] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[3]) end
if rec then redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
elseif ARGV[4] == '0' then redis.call('SET', KEYS[1], ARGV[2])
else redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[4]) end
if holder == ARGV[1] then redis.call('DEL', KEYS[2]) end
return {'stored'}
"""

RELEASE = """
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  local rec = redis.call('GET', KEYS[1])
  if rec and not cjson.decode(rec).status then redis.call('DEL', KEYS[1]) end
end
return 0
"""


def names(tenant: str, key: str | None) -> tuple[str, str, str]:
    """The record, lock and ledger keys of (tenant, key)."""
    slot = json.dumps([tenant, key])
    return f"idem:rec:{slot}", f"idem:lock:{slot}", f"ledger:{slot}"


class Service:
    def __init__(self, store: redis.Redis, direct: redis.Redis, flaws: Collection[str]) -> None:
        self.store, self.direct, self.flaws = store, direct, frozenset(flaws)
        self.retention = 0 if "no-ttl" in flaws else RETENTION
        self.claim = store.register_script(CLAIM)
        self.commit = store.register_script(COMMIT)
        self.release = store.register_script(RELEASE)

    def handle(self, req: Req) -> Resp:
        if req.path == "/charges":
            if req.method != "POST":
                return error(405, "POST only")
            try:
                return self.charge(req)
            except redis.RedisError:
                return error(503, "the key store is unavailable; retry", **RETRY)
        if req.path == "/health":
            return Resp(200, {"ok": True})
        if req.path == "/test/effects":  # read straight from Redis, not through the proxy
            ledger = names(req.query.get("tenant", "-"), req.query.get("key"))[2]
            ids = [i.decode() for i in self.direct.lrange(ledger, 0, -1)]
            return Resp(200, {"count": len(ids), "ids": ids})
        return error(404, "no such route")

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=255)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        keys = names(tenant, key)
        lock = json.dumps({"token": secrets.token_hex(8), "fp": fp})
        verdict, *stored = self.claim(keys=keys[:2], args=[fp, lock, LEASE_MS, self.retention])
        if verdict == b"mismatch":
            return error(422, "this key was used with another request")
        if verdict == b"done":
            return replay(stored[0])
        if verdict == b"busy":
            return error(409, "a request with this key is in progress", **RETRY)
        try:
            answer = self.perform(req, body)
        except Exception:
            self.release(keys=keys[:2], args=[lock])
            return error(500, "the charge failed; retry")
        return self.finish(keys, lock, fp, answer)

    def perform(self, req: Req, body: Any) -> Resp:
        """The charge itself (a 10 ms payment provider); records nothing."""
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "fail":
            raise RuntimeError("injected handler error")
        if not valid_amount(body):
            return error(400, "amount must be a positive integer")
        time.sleep(0.01)
        charge = "ch_" + secrets.token_hex(6)
        return Resp(201, {"id": charge, "amount": body["amount"]},
                    {"Location": f"/charges/{charge}"})

    def finish(self, keys: tuple[str, str, str], lock: str, fp: str, answer: Resp) -> Resp:
        if "lost-lock-empty-fingerprint" in self.flaws:
            held = self.store.get(keys[1])  # FLAW: gone once the lock's TTL ran out
            fp = json.loads(held)["fp"] if held else ""
        record = json.dumps({"fp": fp, "status": answer.status, "body": answer.body,
                             "location": answer.headers.get("Location")})
        charge = answer.body["id"] if answer.status == 201 else ""
        verdict, *stored = self.commit(keys=keys, args=[lock, record, charge, self.retention])
        if verdict == b"taken":  # fenced off: a retry took the key over and is running
            return error(409, "this request lost its claim on the key", **RETRY)
        if verdict == b"done":  # a retry took over and finished first: its answer stands
            return replay(stored[0])
        return answer


def replay(raw: bytes) -> Resp:
    record = json.loads(raw)
    headers = {"Idempotent-Replayed": "true"}
    if record.get("location"):
        headers["Location"] = record["location"]
    return Resp(record["status"], record["body"], headers)


def start_redis(port: int, directory: Path) -> None:
    """Start redis-server on ``port`` unless one answers there; return once it answers.  It
    stays in this process's group, so stopping or killing the group stops it too."""
    probe = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5,
                        retry=Retry(NoBackoff(), 0))
    try:
        probe.ping()
        return
    except redis.ConnectionError:
        pass
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "redis.log").open("ab") as log:
        subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                          "--dir", str(directory), "--appendonly", "yes",
                          "--appendfsync", "always", "--save", "", "--protected-mode", "yes"],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 10
    while True:
        try:
            probe.ping()
            return
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise SystemExit(f"redis-server did not answer on port {port}; see "
                                 f"{directory / 'redis.log'}") from None
            time.sleep(0.02)


def client(address: str) -> redis.Redis:
    """A client that reports a store error at once (no retries of its own: a retried script
    could run twice)."""
    host, port = address.rsplit(":", 1)
    return redis.Redis(host=host, port=int(port), socket_timeout=2, socket_connect_timeout=1,
                       retry=Retry(NoBackoff(), 0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flaw", dest="flaws", action="append", choices=FLAWS, default=[],
                        help="switch a named flaw on; repeat it for both")
    parser.add_argument("--redis-port", type=int, required=True,
                        help="the port redis-server listens on (started here when none answers)")
    parser.add_argument("--redis-via", required=True,
                        help="host:port through which the service reaches that Redis")
    parser.add_argument("--redis-dir", type=Path, required=True, help="Redis's data directory")
    args = parser.parse_args()
    start_redis(args.redis_port, args.redis_dir)
    service = Service(client(args.redis_via), client(f"127.0.0.1:{args.redis_port}"), args.flaws)
    serve_stdlib(service.handle, args.host, args.port)


if __name__ == "__main__":
    main()

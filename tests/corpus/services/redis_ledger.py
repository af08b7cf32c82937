"""A service whose keys, stored responses and charges all live in a Redis it starts itself,
reached through the harness's store proxy (redis-py).

Choices: the claim is one Lua script (``EVALSHA``: the key's hash is written only when absent,
expired, or held by a lease that has run out, with a fresh fencing token); the charge and the
stored response commit together in one ``MULTI``/``EXEC`` under ``WATCH`` of the key, only while
the token still holds; a store error answers 503 and frees the key if its token still holds and
no response is stored.  A 30 s lease on the service's movable clock; validation errors stored.
The process starts ``redis-server`` (append-only, fsync on every write) on ``--redis-port`` as
its child, so a SIGKILL of the process group takes Redis down too and a restart finds every
write Redis acknowledged.  The clock, the ledger count and the key count use a second connection
straight to Redis, so a fault on the link the requests use never blinds them.  redis-py's own
retries are off: a command on a cut connection fails once and the service decides.

Flaw: ``two-step-response`` writes the charge (``RPUSH``) and then the stored response
(``HSET``) as two commands: a cut between them leaves a charge whose key is still claimed, the
error path frees the key, and the retry charges again.
"""

from __future__ import annotations

import argparse
import json
import secrets
import subprocess
import time
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

RETENTION = 24 * 3600.0
LEASE = 30.0
FLAWS = ("two-step-response",)
#: KEYS[1] the key's hash; ARGV fingerprint, token, now, lease, retention.  Answers
#: {"won"}, {"mismatch"}, {"busy"} or {"done", status, body, location}.
CLAIM = """
local row = {}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do row[fields[i]] = fields[i + 1] end
local now = tonumber(ARGV[3])
if row.fp and tonumber(row.created) > now - tonumber(ARGV[5]) then
  if row.fp ~= ARGV[1] then return {'mismatch'} end
  if row.status then return {'done', row.status, row.body, row.location} end
  if tonumber(row.leased_until) > now then return {'busy'} end
  redis.call('HSET', KEYS[1], 'token', ARGV[2], 'leased_until', now + tonumber(ARGV[4]))
  return {'won'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fp', ARGV[1], 'token', ARGV[2], 'created', now,
           'leased_until', now + tonumber(ARGV[4]))
return {'won'}
"""
#: KEYS[1] the key's hash; ARGV token.  Frees a key still claimed by this token.
RELEASE = """
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] and redis.call('HEXISTS', KEYS[1], 'status') == 0
then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _client(host: str, port: int, **options: Any) -> redis.Redis:
    return redis.Redis(host=host, port=port, decode_responses=True, socket_timeout=2,
                       socket_connect_timeout=2, retry=Retry(NoBackoff(), 0), **options)


def start_redis(port: int, workdir: Path) -> None:
    """Start redis-server as this process's child, unless it already answers on ``port``."""
    direct = _client("127.0.0.1", port)
    try:
        direct.ping()
        return
    except redis.ConnectionError:
        pass
    data = workdir / "redis"
    data.mkdir(parents=True, exist_ok=True)
    subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--dir",
                      str(data), "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
                     stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            direct.ping()
            return
        except (redis.ConnectionError, redis.BusyLoadingError):
            time.sleep(0.02)
    raise SystemExit(f"redis-server did not answer on 127.0.0.1:{port} within 10 s")


def _slot(tenant: str | None, key: str | None) -> tuple[str, str]:
    """The Redis names of a key's hash and of its ledger list (the tenant's length first, so
    no tenant and key can spell another pair's names)."""
    tenant = tenant or ""
    prefix = f"{len(tenant)}:{tenant}:{key or ''}"
    return f"idem:{prefix}", f"ledger:{prefix}"


class Service:
    def __init__(self, via: redis.Redis, direct: redis.Redis, flaw: str | None) -> None:
        self.via, self.direct, self.flaw = via, direct, flaw
        self.claim_script = via.register_script(CLAIM)
        self.release_script = via.register_script(RELEASE)

    def now(self) -> float:
        return time.time() + float(self.direct.get("clock:offset") or 0)

    def handle(self, req: Req) -> Resp:
        if req.path == "/charges" and req.method == "POST":
            return self.charge(req)
        if req.path == "/charges":
            return error(405, "POST only")
        if req.path == "/ready":
            return Resp(200, {"ok": True})
        if req.path == "/ops/effects":
            _, ledger = _slot(req.query.get("tenant"), req.query.get("key"))
            ids = self.direct.lrange(ledger, 0, -1)
            return Resp(200, {"count": len(ids), "ids": ids})
        if req.path == "/ops/time" and req.method == "POST":
            self.direct.incrbyfloat("clock:offset", float(json.loads(req.body)["seconds"]))
            return Resp(200, {})
        if req.path == "/ops/keys":
            return Resp(200, self.key_table())
        return error(404, "no such route")

    def key_table(self) -> dict[str, int]:
        """Rows and keys in progress, after deleting the expired ones."""
        horizon, rows, running = self.now() - RETENTION, 0, 0
        for name in self.direct.scan_iter("idem:*", count=1000):
            created, status = self.direct.hmget(name, "created", "status")
            if created is not None and float(created) <= horizon:
                self.direct.delete(name)
            elif created is not None:
                rows += 1
                running += status is None
        return {"rows": rows, "in_progress": running}

    def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=255)
        if isinstance(got, Resp):
            return got
        idem, ledger = _slot(got.tenant, got.key)
        fp = fingerprint(req.method, req.target, got.body)
        token = secrets.token_hex(8)
        try:
            verdict = self.claim_script(keys=[idem],
                                        args=[fp, token, self.now(), LEASE, RETENTION])
        except redis.RedisError:
            self.release(idem, token)
            return error(503, "the store is unavailable; retry", **{"Retry-After": "1"})
        if verdict[0] == "mismatch":
            return error(422, "the key was used with a different request")
        if verdict[0] == "busy":
            return error(409, "in progress", **{"Retry-After": "1"})
        if verdict[0] == "done":
            return self.replay(verdict[1:])
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "handler-error":
            self.release(idem, token)
            return error(500, "the charge failed; retry")
        answer = provide(got.body, "ch", "/charges")
        try:
            return self.commit(idem, ledger, token, answer)
        except redis.RedisError:
            self.release(idem, token)
            return error(503, "the store is unavailable; retry", **{"Retry-After": "1"})

    def commit(self, idem: str, ledger: str, token: str, answer: Resp) -> Resp:
        """The charge and the stored answer, together, only while ``token`` holds the key."""
        stored = {"status": answer.status, "body": json.dumps(answer.body), "token": "",
                  "location": answer.headers.get("Location", "")}
        if self.flaw == "two-step-response":
            if self.via.hget(idem, "token") != token:
                return self.fenced(idem, answer)
            if answer.status == 201:
                self.via.rpush(ledger, answer.body["id"])
            self.via.hset(idem, mapping=stored)
            return answer
        with self.via.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(idem)
                    if pipe.hget(idem, "token") != token:
                        pipe.unwatch()
                        return self.fenced(idem, answer)
                    pipe.multi()
                    if answer.status == 201:
                        pipe.rpush(ledger, answer.body["id"])
                    pipe.hset(idem, mapping=stored)
                    pipe.execute()
                    return answer
                except redis.WatchError:
                    continue

    def fenced(self, idem: str, answer: Resp) -> Resp:
        """The token no longer holds the key: this request's own answer when its commit landed
        although the acknowledgement was lost (a WATCH broken by a dropped connection comes
        back here), the winner's stored answer after a takeover, else 409."""
        row = self.via.hmget(idem, "status", "body", "location")
        if row[1] == json.dumps(answer.body):
            return answer
        if row[0] is not None:
            return self.replay(row)
        return error(409, "this request's claim was taken over", **{"Retry-After": "1"})

    def release(self, idem: str, token: str) -> None:
        with suppress(redis.RedisError):  # if not now, the lease frees the key later
            self.release_script(keys=[idem], args=[token])

    @staticmethod
    def replay(row: list[Any]) -> Resp:
        status, body, location = row
        headers = {"Idempotent-Replayed": "true"}
        if location:
            headers["Location"] = location
        return Resp(int(status), json.loads(body), headers)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flaw", choices=list(FLAWS), default=None)
    parser.add_argument("--redis-port", type=int, required=True, help="where Redis listens")
    parser.add_argument("--redis-via", required=True, help="HOST:PORT the requests reach it by")
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args()
    start_redis(args.redis_port, args.workdir)
    host, _, port = args.redis_via.rpartition(":")
    service = Service(_client(host, int(port)), _client("127.0.0.1", args.redis_port), args.flaw)
    serve_stdlib(service.handle, args.host, args.port)


if __name__ == "__main__":
    main()

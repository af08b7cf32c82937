"""A test clock kept in memory beside a key table kept on disk.

Choices: keys live in a SQLite file (``--db``), so a claim, a charge and a stored answer
survive a crash; the test clock is an offset held by the process (``POST /admin/clock`` with
``{"seconds": N}`` moves it, ``GET /admin/now`` answers ``{"now": <Unix seconds>}``), so a
restarted process starts again from real time while its rows keep the times they were stamped
with.  A claim made on a moved clock therefore looks younger after a restart: its lease runs
out only once the restarted clock reaches it again, which is right for the clock the process
has.  Tenants come in an ``X-Account`` header; replays are marked ``X-Idempotent-Replay: 1``; a
claim left by a crash is taken over after a 30 s lease with a new fencing token, and the
charge and the stored answer commit in one transaction only while that token still holds.
The process can die at two points on request (``X-Test-Crash: after-claim`` or
``after-work``, the latter with the charge written but not committed).  One process only: a
second one would have a clock of its own.

Flaws: ``no-takeover`` never takes over a claim whose lease has run out (a crash leaves the
key in progress for good); ``retention-1h`` forgets keys after an hour of its clock while the
service promises a day; ``takeover-finished`` applies the lease to every row, finished ones
too, so a retry more than 30 s after the original runs it again (the lease and the retention
confused: both are ages on the same clock).  ``no-takeover`` and ``retention-1h`` combine;
``takeover-finished`` combines with neither (``CANNOT_COMBINE``).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Collection
from contextlib import closing
from typing import Any

from tests.corpus.services._kit import (
    Clock,
    Req,
    Resp,
    arguments,
    error,
    fingerprint,
    open_sqlite,
    provide,
    read_keyed,
    serve_stdlib,
    stall,
)

RETENTION = 24 * 3600.0
LEASE = 30.0
FLAWS = ("no-takeover", "retention-1h", "takeover-finished")
CANNOT_COMBINE = {
    frozenset({"no-takeover", "takeover-finished"}):
        "no-takeover never takes a lapsed claim over, so takeover-finished (a finished key run "
        "again past its lease) can never show: its retries get 409 instead",
    frozenset({"retention-1h", "takeover-finished"}):
        "takeover-finished already runs again every retry more than 30 s after its key was "
        "claimed, so retention-1h (a retry after an hour run again) can never show apart from it",
}
SCHEMA = """
create table if not exists claims (account text not null, key text not null, fp text not null,
  token text, claimed_at real not null, created_at real not null, status integer, body text,
  location text, primary key (account, key));
create table if not exists charges (id text primary key, account text not null, key text,
  amount integer);
"""
REPLAYED = {"X-Idempotent-Replay": "1"}


class Service:
    def __init__(self, db: str, flaws: Collection[str]) -> None:
        self.db, self.flaws = db, frozenset(flaws)
        self.clock = Clock()  # in memory: a restart starts it again from real time
        self.clock_lock = threading.Lock()
        self.retention = 3600.0 if "retention-1h" in flaws else RETENTION
        with closing(open_sqlite(db)) as conn:
            conn.executescript(SCHEMA)

    def now(self) -> float:
        with self.clock_lock:
            return self.clock.now()

    def handle(self, req: Req) -> Resp:
        with closing(open_sqlite(self.db)) as conn:
            if req.path == "/v1/charges":
                return self.charge(conn, req) if req.method == "POST" else error(405, "POST only")
            if req.path == "/v1/health":
                return Resp(200, {"ok": True})
            return self.admin(conn, req)

    def admin(self, conn: sqlite3.Connection, req: Req) -> Resp:
        if req.path == "/admin/now" and req.method == "GET":
            return Resp(200, {"now": self.now()})
        if req.path == "/admin/clock" and req.method == "POST":
            try:
                seconds = float(json.loads(req.body)["seconds"])
            except (ValueError, KeyError, TypeError):
                return error(400, 'the body must be {"seconds": <number>}')
            with self.clock_lock:
                self.clock.advance(seconds)
                return Resp(200, {"now": self.clock.now()})
        if req.path == "/admin/effects":
            rows = conn.execute("select id from charges where account = ? and key is ?",
                                (req.query.get("account", ""), req.query.get("key"))).fetchall()
            return Resp(200, {"count": len(rows), "ids": [r[0] for r in rows]})
        if req.path == "/admin/keys":
            rows, running = conn.execute("select count(*), coalesce(sum(status is null), 0) "
                                         "from claims").fetchone()
            return Resp(200, {"rows": rows, "in_progress": running})
        if req.path == "/admin/cleanup" and req.method == "POST":
            deleted = conn.execute("delete from claims where created_at <= ?",
                                   (self.now() - self.retention,)).rowcount
            return Resp(200, {"deleted": deleted})
        return error(404, "no such route")

    def charge(self, conn: sqlite3.Connection, req: Req) -> Resp:
        got = read_keyed(req)
        if isinstance(got, Resp):
            return got
        account, key, body = req.headers.get("x-account", ""), got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        token = secrets.token_hex(8)
        conn.execute("begin immediate")
        try:
            refusal = self.claim(conn, account, key, fp, token)
        finally:
            conn.execute("commit")
        return refusal or self.work(conn, req, account, key, token, body)

    def claim(self, conn: sqlite3.Connection, account: str, key: str, fp: str,
              token: str) -> Resp | None:
        """None when this request now holds the key, else the answer to give (inside the
        caller's transaction)."""
        now = self.now()
        conn.execute("delete from claims where created_at <= ?", (now - self.retention,))
        row = conn.execute("select fp, claimed_at, status, body, location from claims where "
                           "account = ? and key = ?", (account, key)).fetchone()
        if row is None:
            conn.execute("insert into claims (account, key, fp, token, claimed_at, created_at) "
                         "values (?, ?, ?, ?, ?, ?)", (account, key, fp, token, now, now))
            return None
        stored_fp, claimed_at, status, stored, location = row
        if stored_fp != fp:
            return error(422, "this key was sent with another request")
        lapsed = claimed_at + LEASE <= now
        if status is not None and not ("takeover-finished" in self.flaws and lapsed):
            headers = {**REPLAYED, **({"Location": location} if location else {})}
            return Resp(status, json.loads(stored), headers)
        if not lapsed or "no-takeover" in self.flaws:
            return error(409, "a request with this key is in progress", **{"Retry-After": "1"})
        conn.execute("update claims set token = ?, claimed_at = ?, status = null, body = null, "
                     "location = null where account = ? and key = ?",
                     (token, now, account, key))
        return None

    def work(self, conn: sqlite3.Connection, req: Req, account: str, key: str, token: str,
             body: Any) -> Resp:
        crash = req.headers.get("x-test-crash")
        try:
            if crash == "after-claim":
                os._exit(137)
            stall(req.headers.get("x-test-delay-ms"))
            if req.headers.get("x-test-fault") == "raise":
                raise RuntimeError("injected handler error")
            answer = provide(body, "ch", "/v1/charges")
            conn.execute("begin immediate")
            try:
                if answer.status == 201:
                    conn.execute("insert into charges values (?, ?, ?, ?)",
                                 (answer.body["id"], account, key, body["amount"]))
                if crash == "after-work":
                    os._exit(137)  # the charge is written, not committed: it dies with us
                fenced = conn.execute(
                    "update claims set status = ?, body = ?, location = ?, token = null where "
                    "account = ? and key = ? and token = ?",
                    (answer.status, json.dumps(answer.body), answer.headers.get("Location"),
                     account, key, token)).rowcount
                if not fenced:  # the lease ran out and another request took the key over
                    conn.execute("rollback")
                    return error(409, "this request lost its claim on the key",
                                 **{"Retry-After": "1"})
                conn.execute("commit")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("rollback")
                raise
        except Exception:
            conn.execute("delete from claims where account = ? and key = ? and token = ?",
                         (account, key, token))  # release: the retry runs again
            return error(500, "the charge failed; retry")
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS, store=True, cannot_combine=CANNOT_COMBINE)
    serve_stdlib(Service(args.db, args.flaws).handle, args.host, args.port)

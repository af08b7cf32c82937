"""One keyed endpoint, a SQLite file, a 30 s lease: the plainest durable design.

Choices: a single keyed operation (``POST /charges``) and no other route, so a PUT or another
path is simply 405/404 and never touches a key; keys are RFC 8941 sf-strings as the draft says;
a key left in progress by a crash may be taken over after a 30 s lease, and every claim carries
a fencing token that the final commit checks, so a slow original cannot commit after a takeover.
State lives in one SQLite file, so several processes started on it are one service.

The claim is one ``BEGIN IMMEDIATE`` transaction; the charge and the stored response are
another, which commits only while the claim's token still holds.

Flaws: ``check-then-insert`` looks the key up, charges, then stores (no claim: concurrent
copies all charge); ``no-lease`` never takes a key over (a crash leaves it stuck).  The two
cannot be switched on at once (``CANNOT_COMBINE``).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from collections.abc import Collection
from contextlib import closing

from tests.corpus.services._kit import (
    Req,
    Resp,
    arguments,
    error,
    fingerprint,
    open_sqlite,
    read_keyed,
    serve_stdlib,
    stall,
    valid_amount,
)

RETENTION = 24 * 3600.0
LEASE = 30.0
FLAWS = ("check-then-insert", "no-lease")
CANNOT_COMBINE = {
    frozenset(FLAWS): "check-then-insert claims no key, so no-lease (a claim left by a crash "
                      "never taken over) can never show",
}
SCHEMA = """
create table if not exists keys (tenant text not null, key text not null, fp text not null,
  token text, done integer not null default 0, claimed_at real, created_at real not null,
  status integer, body text, location text, primary key (tenant, key));
create table if not exists charges (id text primary key, tenant text, key text, amount integer);
create table if not exists clock (id integer primary key check (id = 1), offset real not null);
insert or ignore into clock values (1, 0);
"""


class Service:
    def __init__(self, db: str, flaws: Collection[str]) -> None:
        self.db, self.flaws = db, frozenset(flaws)
        with closing(open_sqlite(self.db)) as conn:
            conn.executescript(SCHEMA)

    def now(self, conn: sqlite3.Connection) -> float:
        return time.time() + conn.execute("select offset from clock").fetchone()[0]

    def handle(self, req: Req) -> Resp:
        with closing(open_sqlite(self.db)) as conn:
            if req.path == "/charges":
                return self.charge(conn, req) if req.method == "POST" else Resp(
                    405, {"error": "POST only"}, {"Allow": "POST"})
            if req.path == "/health":
                return Resp(200, {"ok": True})
            return self.admin(conn, req)

    def admin(self, conn: sqlite3.Connection, req: Req) -> Resp:
        if req.path == "/_admin/effects":
            key = req.query.get("key")
            rows = conn.execute("select id from charges where tenant = ? and key is ?",
                                (req.query.get("tenant", "-"), key)).fetchall()
            return Resp(200, {"count": len(rows), "ids": [r[0] for r in rows]})
        if req.path == "/_admin/clock" and req.method == "POST":
            seconds = float(json.loads(req.body)["seconds"])
            conn.execute("update clock set offset = offset + ?", (seconds,))
            return Resp(200, {"now": self.now(conn)})
        if req.path == "/_admin/keys":
            rows, running = conn.execute("select count(*), coalesce(sum(done = 0), 0) from keys"
                                         ).fetchone()
            return Resp(200, {"rows": rows, "in_progress": running})
        if req.path == "/_admin/cleanup" and req.method == "POST":
            conn.execute("delete from keys where created_at <= ?", (self.now(conn) - RETENTION,))
            return Resp(200, {})
        return error(404, "no such route")

    def charge(self, conn: sqlite3.Connection, req: Req) -> Resp:
        got = read_keyed(req, syntax="sf-string", required="an Idempotency-Key header is required")
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "-", got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        if "check-then-insert" in self.flaws:
            return self.unclaimed(conn, req, tenant, key, fp, body)
        token = secrets.token_hex(8)
        conn.execute("begin immediate")
        try:
            now = self.now(conn)
            conn.execute("delete from keys where created_at <= ?", (now - RETENTION,))
            row = conn.execute("select fp, done, claimed_at, status, body, location from keys "
                               "where tenant = ? and key = ?", (tenant, key)).fetchone()
            if row is None:
                conn.execute("insert into keys (tenant, key, fp, token, claimed_at, created_at) "
                             "values (?, ?, ?, ?, ?, ?)", (tenant, key, fp, token, now, now))
            elif row[0] != fp:
                return error(422, "this key was used with another request")
            elif row[1]:
                return replay(row[3], row[4], row[5])
            elif "no-lease" in self.flaws or row[2] + LEASE > now:
                return error(409, "a request with this key is in progress", **{"Retry-After": "1"})
            else:  # the lease ran out: the claimant died (or is very slow); take the key over
                conn.execute("update keys set token = ?, claimed_at = ? where tenant = ? and "
                             "key = ?", (token, now, tenant, key))
        finally:
            conn.execute("commit")
        return self.work(conn, req, tenant, key, token, body)

    def work(self, conn: sqlite3.Connection, req: Req, tenant: str, key: str, token: str,
             body: object) -> Resp:
        fault = req.headers.get("x-test-fault", "")
        try:
            crash_at(fault, "crash-after-claim")
            stall(req.headers.get("x-test-delay-ms"))
            if fault == "fail-before-work":
                raise RuntimeError("injected handler error")
            if not valid_amount(body):  # a validation error is stored like any answer
                status, answer, location = 400, {"error": "amount must be a positive integer"}, None
            else:
                time.sleep(0.02)  # the payment provider
                charge_id = "ch_" + secrets.token_hex(6)
                status, answer = 201, {"id": charge_id, "amount": body["amount"]}  # type: ignore[index]
                location = f"/charges/{charge_id}"
            conn.execute("begin immediate")
            try:
                holder = conn.execute("select token from keys where tenant = ? and key = ?",
                                      (tenant, key)).fetchone()
                if holder is None or holder[0] != token:  # fenced off: another claim took over
                    conn.execute("rollback")
                    return error(409, "this request lost its claim on the key",
                                 **{"Retry-After": "1"})
                if status == 201:
                    conn.execute("insert into charges values (?, ?, ?, ?)",
                                 (answer["id"], tenant, key, answer["amount"]))
                if fault == "fail-after-work":
                    raise RuntimeError("injected handler error after the charge")
                crash_at(fault, "crash-after-work")
                conn.execute("update keys set done = 1, token = null, status = ?, body = ?, "
                             "location = ? where tenant = ? and key = ?",
                             (status, json.dumps(answer), location, tenant, key))
                conn.execute("commit")
            except BaseException:
                conn.execute("rollback")
                raise
        except Exception:
            conn.execute("delete from keys where tenant = ? and key = ? and token = ?",
                         (tenant, key, token))  # release: the retry runs again
            return error(500, "the charge failed; retry")
        crash_at(fault, "crash-before-response")
        return Resp(status, answer, {"Location": location} if location else {})

    def unclaimed(self, conn: sqlite3.Connection, req: Req, tenant: str, key: str, fp: str,
                  body: object) -> Resp:
        """FLAW check-then-insert: look, charge, store; nothing stops a concurrent copy."""
        row = conn.execute("select fp, status, body, location from keys where tenant = ? and "
                           "key = ? and done = 1", (tenant, key)).fetchone()
        if row is not None:
            return error(422, "reused key") if row[0] != fp else replay(row[1], row[2], row[3])
        if not valid_amount(body):
            return error(400, "amount must be a positive integer")
        stall(req.headers.get("x-test-delay-ms"))
        time.sleep(0.02)
        charge_id = "ch_" + secrets.token_hex(6)
        answer = {"id": charge_id, "amount": body["amount"]}  # type: ignore[index]
        conn.execute("insert into charges values (?, ?, ?, ?)", (charge_id, tenant, key,
                                                                 answer["amount"]))
        now = self.now(conn)
        conn.execute("insert or replace into keys (tenant, key, fp, done, created_at, status, "
                     "body, location) values (?, ?, ?, 1, ?, 201, ?, ?)",
                     (tenant, key, fp, now, json.dumps(answer), f"/charges/{charge_id}"))
        return Resp(201, answer, {"Location": f"/charges/{charge_id}"})


def replay(status: int, body: str, location: str | None) -> Resp:
    headers = {"Idempotent-Replayed": "true"}
    if location:
        headers["Location"] = location
    return Resp(status, json.loads(body), headers)


def crash_at(fault: str, point: str) -> None:
    if fault == point:
        os._exit(137)


if __name__ == "__main__":
    args = arguments(FLAWS, store=True, cannot_combine=CANNOT_COMBINE)
    serve_stdlib(Service(args.db, args.flaws).handle, args.host, args.port)

"""A cleanup that sweeps expired rows, claims abandoned in progress among them.

Choices: a request goes through three steps, each its own transaction on a SQLite file, as in
Stripe's atomic phases: the claim (30 s lease, a fencing token); the charge, written with its
recovery point (the key's row says ``charged`` and holds the answer) only while the token
holds; then the slow part (``X-Test-Delay-Ms``: the provider's confirmation), after which the
row is marked ``done``.  A retry that finds a ``charged`` row whose lease ran out takes it over
and finishes it from the recovery point, without charging again.

The cleanup runs every 2 s of real time in a background thread, on ``POST /admin/cleanup``,
and at the start of every claim.  It deletes the rows older than the 24 h retention, and the
rows still ``claimed`` whose lease has passed: a claim that crashed before charging (or, after
a clock jump, one whose handler still runs: its later writes are fenced off).  Rows with a
recovery point are never swept before the retention, whatever their lease, or a crash after
the charge would be charged again.  The test clock is an offset kept in the SQLite file
(``POST /admin/clock`` with ``{"advance_by": N}``), so it survives a restart, and the
background sweep reads it as every request does.  A bare ASGI app under uvicorn; blocking
SQLite calls run in worker threads.

Flaws: ``sweep-running`` deletes every row in progress, whatever its lease and recovery
point (a retry while the original runs charges again); ``sweep-charged`` honours the lease
but not the recovery point (after a crash between the charge and the answer, the retry past
the lease charges again); ``no-cleanup`` never deletes anything (expired rows are only
ignored), so the key table grows without bound.  No two of them can be switched on at once
(``CANNOT_COMBINE``): each changes the one sweep.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sqlite3
import threading
import time
from contextlib import closing
from typing import Any

from tests.corpus.services._kit import (
    Req,
    Resp,
    arguments,
    error,
    fingerprint,
    open_sqlite,
    pause,
    provide,
    read_keyed,
    serve_asgi,
)

RETENTION = 24 * 3600.0
LEASE = 30.0
SWEEP_EVERY = 2.0
FLAWS = ("sweep-running", "sweep-charged", "no-cleanup")
CANNOT_COMBINE = {
    frozenset({"sweep-running", "sweep-charged"}):
        "both choose which rows in progress the sweep deletes, each its own way; choose one",
    **{frozenset({"no-cleanup", other}):
       f"no-cleanup never sweeps anything, so {other} (rows in progress swept too early) can "
       "never show" for other in ("sweep-running", "sweep-charged")},
}
SCHEMA = """
create table if not exists keys (tenant text not null, key text not null, fp text not null,
  token text, leased_until real not null, created real not null,
  stage text not null check (stage in ('claimed', 'charged', 'done')),
  status integer, body text, location text, primary key (tenant, key));
create table if not exists charges (id text primary key, tenant text, key text, amount integer);
create table if not exists clock (id integer primary key check (id = 1), offset real not null);
insert or ignore into clock values (1, 0);
"""
#: Which rows in progress the cleanup deletes, by flaw: the correct sweep only lapsed claims
#: with nothing charged.
IN_PROGRESS_SWEPT = {
    None: "stage = 'claimed' and leased_until <= :now",
    "sweep-running": "stage != 'done'",
    "sweep-charged": "stage != 'done' and leased_until <= :now",
}


class Service:
    def __init__(self, db: str, flaw: str | None) -> None:
        self.db, self.flaw = db, flaw
        with closing(open_sqlite(db)) as conn:
            conn.executescript(SCHEMA)

    @staticmethod
    def now(conn: sqlite3.Connection) -> float:
        offset: float = conn.execute("select offset from clock").fetchone()[0]
        return time.time() + offset

    def sweep(self, conn: sqlite3.Connection) -> int:
        """Delete expired rows (inside the caller's transaction); how many went."""
        if self.flaw == "no-cleanup":
            return 0
        in_progress = IN_PROGRESS_SWEPT.get(self.flaw, IN_PROGRESS_SWEPT[None])
        now = self.now(conn)
        return conn.execute(f"delete from keys where created <= :horizon or ({in_progress})",
                            {"now": now, "horizon": now - RETENTION}).rowcount

    def sweep_forever(self) -> None:
        with closing(open_sqlite(self.db)) as conn:
            while True:
                time.sleep(SWEEP_EVERY)
                conn.execute("begin immediate")
                try:
                    self.sweep(conn)
                finally:
                    conn.execute("commit")

    async def handle(self, req: Req) -> Resp:
        if req.path == "/api/charges" and req.method == "POST":
            return await self.charge(req)
        if req.path == "/api/charges":
            return error(405, "POST only")
        return await asyncio.to_thread(self.admin, req)

    def admin(self, req: Req) -> Resp:
        with closing(open_sqlite(self.db)) as conn:
            if req.path == "/healthz":
                return Resp(200, {"ok": True})
            if req.path == "/admin/effects":
                rows = conn.execute("select id from charges where tenant = ? and key is ?",
                                    (req.query.get("tenant"), req.query.get("key"))).fetchall()
                return Resp(200, {"count": len(rows), "ids": [r[0] for r in rows]})
            if req.path == "/admin/clock" and req.method == "POST":
                try:
                    seconds = float(json.loads(req.body)["advance_by"])
                except (ValueError, KeyError, TypeError):
                    return error(400, 'the body must be {"advance_by": <seconds>}')
                conn.execute("update clock set offset = offset + ?", (seconds,))
                return Resp(200, {"now": self.now(conn)})
            if req.path == "/admin/cleanup" and req.method == "POST":
                return Resp(200, {"deleted": self.sweep(conn)})
            if req.path == "/admin/keys":
                rows, running = conn.execute("select count(*), coalesce(sum(stage != 'done'), 0) "
                                             "from keys").fetchone()
                return Resp(200, {"rows": rows, "in_progress": running})
        return error(404, "no such route")

    async def charge(self, req: Req) -> Resp:
        got = read_keyed(req)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "", got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        token = secrets.token_hex(8)
        crash = req.headers.get("x-crash-at")
        verdict = await asyncio.to_thread(self.claim, tenant, key, fp, token)
        if isinstance(verdict, Resp):
            return verdict
        if crash == "after-claim":
            os._exit(137)
        # a charged row taken over repeats the answer stored with its charge: a replay
        headers = {} if verdict is None else {"Idempotent-Replayed": "true"}
        if verdict is None:  # a fresh claim: charge, unless the handler fails first
            if req.headers.get("x-test-fault") == "raise":
                await asyncio.to_thread(self.release, tenant, key, token)
                return error(500, "the charge failed; retry")
            verdict = await asyncio.to_thread(self.charge_once, tenant, key, token, body)
            if isinstance(verdict, Resp):
                return verdict
        if crash == "after-work":
            os._exit(137)
        await pause(req.headers.get("x-test-delay-ms"))  # the provider's confirmation
        status, answer, location = verdict
        await asyncio.to_thread(self.finish, tenant, key, token)
        if crash == "before-response":
            os._exit(137)
        return Resp(status, answer, {**headers, **({"Location": location} if location else {})})

    def claim(self, tenant: str, key: str, fp: str,
              token: str) -> Resp | tuple[int, Any, str | None] | None:
        """None for a fresh claim; the recovery point (status, answer, location) for a charged
        row taken over; else the answer to give."""
        with closing(open_sqlite(self.db)) as conn:
            conn.execute("begin immediate")
            try:
                self.sweep(conn)
                now = self.now(conn)
                row = conn.execute("select fp, leased_until, created, stage, status, body, "
                                   "location from keys where tenant = ? and key = ?",
                                   (tenant, key)).fetchone()
                if row is not None and row[2] <= now - RETENTION:
                    row = None  # expired: gone, whether or not it was swept yet
                if row is None or (row[3] == "claimed" and row[1] <= now):
                    conn.execute("insert or replace into keys (tenant, key, fp, token, "
                                 "leased_until, created, stage) values (?, ?, ?, ?, ?, ?, "
                                 "'claimed')", (tenant, key, fp, token, now + LEASE, now))
                    return None
                stored_fp, leased_until, _, stage, status, answer, location = row
                if stored_fp != fp:
                    return error(422, "this key was used with another request")
                if stage == "done":
                    headers = {"Idempotent-Replayed": "true",
                               **({"Location": location} if location else {})}
                    return Resp(status, json.loads(answer), headers)
                if leased_until > now:
                    return error(409, "in progress", **{"Retry-After": "1"})
                conn.execute("update keys set token = ?, leased_until = ? where tenant = ? and "
                             "key = ?", (token, now + LEASE, tenant, key))
                return status, json.loads(answer), location  # charged: finish it, once
            finally:
                conn.execute("commit")

    def charge_once(self, tenant: str, key: str, token: str,
                    body: Any) -> Resp | tuple[int, Any, str | None]:
        """Charge and record the recovery point while the claim holds; a validation error is
        stored as the final answer at once."""
        answer = provide(body, "ch", "/api/charges")
        location = answer.headers.get("Location")
        with closing(open_sqlite(self.db)) as conn:
            conn.execute("begin immediate")
            try:
                stage = "charged" if answer.status == 201 else "done"
                held = conn.execute(
                    "update keys set stage = ?, status = ?, body = ?, location = ? where "
                    "tenant = ? and key = ? and token = ? and stage = 'claimed'",
                    (stage, answer.status, json.dumps(answer.body), location, tenant, key, token)
                ).rowcount
                if not held:  # swept or taken over after its lease: charge nothing
                    conn.execute("rollback")
                    return error(409, "this request lost its claim on the key",
                                 **{"Retry-After": "1"})
                if answer.status == 201:
                    conn.execute("insert into charges values (?, ?, ?, ?)",
                                 (answer.body["id"], tenant, key, body["amount"]))
                conn.execute("commit")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("rollback")
                raise
        return answer.status, answer.body, location

    def finish(self, tenant: str, key: str, token: str) -> None:
        """Mark the row done while the claim holds; a claim taken over meanwhile leaves it to
        the request that took it (the charge and its answer are already on the row)."""
        with closing(open_sqlite(self.db)) as conn:
            conn.execute("update keys set stage = 'done', token = null where tenant = ? and "
                         "key = ? and token = ?", (tenant, key, token))

    def release(self, tenant: str, key: str, token: str) -> None:
        with closing(open_sqlite(self.db)) as conn:
            conn.execute("delete from keys where tenant = ? and key = ? and token = ? and "
                         "stage = 'claimed'", (tenant, key, token))


if __name__ == "__main__":
    args = arguments(FLAWS, store=True, cannot_combine=CANNOT_COMBINE)
    service = Service(args.db, args.flaws[0] if args.flaws else None)  # every pair is refused
    threading.Thread(target=service.sweep_forever, name="sweep", daemon=True).start()
    serve_asgi(service.handle, args.host, args.port)

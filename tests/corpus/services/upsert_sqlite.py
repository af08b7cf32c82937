"""An ASGI service whose claim is a SQLite ``INSERT ... ON CONFLICT DO NOTHING``.

Choices: the claim is a single upsert (the row count says who won), inside one transaction
with the expiry of the old row; a claim left by a dead process is taken over after a 30 s lease
with a new fencing token, and the charge and the stored response commit in one transaction
only while that token still holds; the process offers no crash hook of its own, so the harness
kills it with SIGKILL while a request is in flight.  State is a SQLite file shared by every
process started on it.  Blocking SQLite calls run in worker threads (``asyncio.to_thread``).

Flaws: ``no-fencing`` commits without checking the token (a slow original commits after a
takeover); ``no-replay-header`` forgets the promised ``Idempotent-Replayed`` on replays.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sqlite3
import time
from collections.abc import Collection
from contextlib import closing
from typing import Any

from tests.corpus.services._kit import (
    Req,
    Resp,
    arguments,
    error,
    fingerprint,
    open_sqlite,
    provide,
    read_keyed,
    serve_asgi,
    stall,
)

RETENTION = 24 * 3600.0
LEASE = 30.0
FLAWS = ("no-fencing", "no-replay-header")
SCHEMA = """
create table if not exists idem (tenant text, key text, fp text not null, token text,
  leased_until real, created real not null, status integer, body text, location text,
  primary key (tenant, key));
create table if not exists ledger (id text primary key, tenant text, key text, amount integer);
create table if not exists settings (name text primary key, value real);
insert or ignore into settings values ('clock_offset', 0);
"""


class Service:
    def __init__(self, db: str, flaws: Collection[str]) -> None:
        self.db, self.flaws = db, frozenset(flaws)
        with closing(open_sqlite(self.db)) as conn:
            conn.executescript(SCHEMA)

    @staticmethod
    def now(conn: sqlite3.Connection) -> float:
        offset = conn.execute("select value from settings where name = 'clock_offset'").fetchone()
        return time.time() + offset[0]

    async def handle(self, req: Req) -> Resp:
        if req.path == "/api/charges" and req.method == "POST":
            return await self.charge(req)
        if req.path == "/api/charges":
            return error(405, "POST only")
        return await asyncio.to_thread(self.admin, req)

    def admin(self, req: Req) -> Resp:
        with closing(open_sqlite(self.db)) as conn:
            if req.path == "/ready":
                return Resp(200, {"ok": True})
            if req.path == "/ops/effects":
                rows = conn.execute("select id from ledger where tenant = ? and key is ?",
                                    (req.query.get("tenant"), req.query.get("key"))).fetchall()
                return Resp(200, {"count": len(rows), "ids": [r[0] for r in rows]})
            if req.path == "/ops/time" and req.method == "POST":
                conn.execute("update settings set value = value + ? where name = "
                             "'clock_offset'", (float(json.loads(req.body)["seconds"]),))
                return Resp(200, {})
            if req.path == "/ops/keys":
                now = self.now(conn)
                conn.execute("delete from idem where created <= ?", (now - RETENTION,))
                rows, running = conn.execute("select count(*), coalesce(sum(status is null), 0) "
                                             "from idem").fetchone()
                return Resp(200, {"rows": rows, "in_progress": running})
        return error(404, "no such route")

    async def charge(self, req: Req) -> Resp:
        got = read_keyed(req, max_length=255)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant, got.key, got.body
        fp = fingerprint(req.method, req.target, body)
        token = secrets.token_hex(8)
        verdict = await asyncio.to_thread(self.claim, tenant, key, fp, token)
        if verdict is not None:
            return verdict
        try:
            return await asyncio.to_thread(self.work, req, tenant, key, token, body)
        except Exception:
            await asyncio.to_thread(self.release, tenant, key, token)
            return error(500, "the charge failed; retry")

    def claim(self, tenant: str | None, key: str, fp: str, token: str) -> Resp | None:
        """None when this request now holds the key, else the answer to give."""
        with closing(open_sqlite(self.db)) as conn:
            conn.execute("begin immediate")
            try:
                now = self.now(conn)
                conn.execute("delete from idem where created <= ?", (now - RETENTION,))
                won = conn.execute(
                    "insert into idem (tenant, key, fp, token, leased_until, created) values "
                    "(?, ?, ?, ?, ?, ?) on conflict (tenant, key) do nothing",
                    (tenant or "", key, fp, token, now + LEASE, now)).rowcount
                if won:
                    return None
                row = conn.execute("select fp, leased_until, status, body, location from idem "
                                   "where tenant = ? and key = ?", (tenant or "", key)).fetchone()
                if row[0] != fp:
                    return error(422, "the key was used with a different request")
                if row[2] is not None:
                    headers = {} if "no-replay-header" in self.flaws else {
                        "Idempotent-Replayed": "true"}
                    if row[4]:
                        headers["Location"] = row[4]
                    return Resp(row[2], json.loads(row[3]), headers)
                if row[1] > now:
                    return error(409, "in progress", **{"Retry-After": "1"})
                conn.execute("update idem set token = ?, leased_until = ? where tenant = ? and "
                             "key = ?", (token, now + LEASE, tenant or "", key))
                return None
            finally:
                conn.execute("commit")

    def release(self, tenant: str | None, key: str, token: str) -> None:
        with closing(open_sqlite(self.db)) as conn:
            conn.execute("delete from idem where tenant = ? and key = ? and token = ? and "
                         "status is null", (tenant or "", key, token))

    def work(self, req: Req, tenant: str | None, key: str, token: str, body: Any) -> Resp:
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "handler-error":
            raise RuntimeError("injected handler error")
        answer = provide(body, "ch", "/api/charges")
        with closing(open_sqlite(self.db)) as conn:
            conn.execute("begin immediate")
            try:
                fence = "" if "no-fencing" in self.flaws else " and token = ?"
                args = (tenant or "", key) + (() if "no-fencing" in self.flaws else (token,))
                held = conn.execute(f"select 1 from idem where tenant = ? and key = ?{fence}",
                                    args).fetchone()
                if held is None:
                    conn.execute("rollback")
                    return error(409, "this request's claim was taken over",
                                 **{"Retry-After": "1"})
                if answer.status == 201:
                    conn.execute("insert into ledger values (?, ?, ?, ?)",
                                 (answer.body["id"], tenant, key, body["amount"]))
                conn.execute("update idem set status = ?, body = ?, location = ?, token = null "
                             "where tenant = ? and key = ?",
                             (answer.status, json.dumps(answer.body),
                              answer.headers.get("Location"), tenant or "", key))
                conn.execute("commit")
            except BaseException:
                conn.execute("rollback")
                raise
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS, store=True)
    serve_asgi(Service(args.db, args.flaws).handle, args.host, args.port)

"""A short lease that a heartbeat keeps alive while the handler runs.

Choices: a claim holds its key for 4 s of wall-clock time; one background thread per process
(the heartbeat) wakes every second, timed on the monotonic clock, and pushes the lease of every
claim this process still holds 4 s past the wall clock's now, so a handler may run as long as
it likes and a retry meanwhile gets 409.  A dead process renews nothing, so its claims run out
4 s later and a retry takes the key over.  After the slow part (``X-Test-Delay-Ms``) the charge
is written to the ledger in the same transaction as the stored answer, so a process killed at
any moment leaves both or neither.  Nothing fences that transaction: it writes the charge even
when the claim's token no longer holds (the stored answer is written only while it holds), so
the heartbeat is what keeps a second request from charging while the first runs, as in the
published libraries that renew a lock instead of fencing it.  A failing handler stops renewing
and lets its lease lapse at once, so the retry runs again.

The service has no test clock: its wall clock is moved from outside (libfaketime), and
``GET /time`` answers it in Unix seconds.  A jump of the wall clock is not a wait for the
heartbeat, which sleeps on the monotonic clock: for up to a second after a jump past 4 s every
lease looks spent.  State is a SQLite file shared by every process started on it.

Flaws: ``no-renewal`` never starts the heartbeat (a handler slower than 4 s is taken over
while it runs, and both charge); ``renew-after-error`` cleans up only on success (a handler
that raises is renewed for ever, and its key is stuck); ``renew-any-in-progress`` renews every
row in progress, not only its own claims (a crashed claim is kept alive by the process that
replaced the dead one).  No two of them can be switched on at once (``CANNOT_COMBINE``).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
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
    serve_stdlib,
    stall,
)

RETENTION = 24 * 3600.0
LEASE = 4.0
RENEW_EVERY = 1.0
FLAWS = ("no-renewal", "renew-after-error", "renew-any-in-progress")
CANNOT_COMBINE = {
    **{frozenset({"no-renewal", other}):
       f"no-renewal never starts the heartbeat, so {other} (a lease renewed when it should "
       "not be) can never show" for other in ("renew-after-error", "renew-any-in-progress")},
    frozenset({"renew-after-error", "renew-any-in-progress"}):
        "renew-any-in-progress renews a failed handler's row too (it is still in progress), "
        "so renew-after-error (a failed handler's key renewed for ever) can never show apart "
        "from it",
}
SCHEMA = """
create table if not exists leases (tenant text not null, key text not null, fp text not null,
  token text, leased_until real not null, created real not null, status integer, body text,
  location text, primary key (tenant, key));
create table if not exists ledger (id text primary key, tenant text, key text, amount integer);
"""
Claim = tuple[str, str, str]  # tenant, key, token


class Heartbeat:
    """Renews the leases of the claims this process holds, every RENEW_EVERY seconds of the
    monotonic clock, until the process dies."""

    def __init__(self, db: str, flaws: Collection[str]) -> None:
        self.db, self.flaws = db, frozenset(flaws)
        self.held: set[Claim] = set()
        self.lock = threading.Lock()

    def hold(self, claim: Claim) -> None:
        with self.lock:
            self.held.add(claim)

    def drop(self, claim: Claim) -> None:
        with self.lock:
            self.held.discard(claim)

    def start(self) -> None:
        threading.Thread(target=self._beat, name="heartbeat", daemon=True).start()

    def _beat(self) -> None:
        with closing(open_sqlite(self.db)) as conn:
            while True:
                self.renew(conn)
                time.sleep(RENEW_EVERY)  # CLOCK_MONOTONIC: a wall-clock jump does not wake it

    def renew(self, conn: sqlite3.Connection) -> None:
        until = time.time() + LEASE
        if "renew-any-in-progress" in self.flaws:
            conn.execute("update leases set leased_until = ? where status is null", (until,))
            return
        with self.lock:
            held = list(self.held)
        for tenant, key, token in held:
            conn.execute("update leases set leased_until = ? where tenant = ? and key = ? and "
                         "token = ? and status is null", (until, tenant, key, token))


class Service:
    def __init__(self, db: str, flaws: Collection[str]) -> None:
        self.db, self.flaws = db, frozenset(flaws)
        with closing(open_sqlite(db)) as conn:
            conn.executescript(SCHEMA)
        self.heartbeat = Heartbeat(db, flaws)
        if "no-renewal" not in flaws:
            self.heartbeat.start()

    def handle(self, req: Req) -> Resp:
        with closing(open_sqlite(self.db)) as conn:
            if req.path == "/charges":
                return self.charge(conn, req) if req.method == "POST" else error(405, "POST only")
            if req.path == "/health":
                return Resp(200, {"ok": True})
            if req.path == "/time":
                return Resp(200, time.time())  # Unix seconds, as text
            return self.admin(conn, req)

    def admin(self, conn: sqlite3.Connection, req: Req) -> Resp:
        if req.path == "/admin/effects":
            rows = conn.execute("select id from ledger where tenant = ? and key is ?",
                                (req.query.get("tenant"), req.query.get("key"))).fetchall()
            return Resp(200, {"count": len(rows), "ids": [r[0] for r in rows]})
        if req.path == "/admin/keys":
            rows, running = conn.execute("select count(*), coalesce(sum(status is null), 0) "
                                         "from leases").fetchone()
            return Resp(200, {"rows": rows, "in_progress": running})
        if req.path == "/admin/cleanup" and req.method == "POST":
            deleted = conn.execute("delete from leases where created <= ?",
                                   (time.time() - RETENTION,)).rowcount
            return Resp(200, {"deleted": deleted})
        return error(404, "no such route")

    def charge(self, conn: sqlite3.Connection, req: Req) -> Resp:
        got = read_keyed(req)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant or "", got.key, got.body
        claim = (tenant, key, secrets.token_hex(8))
        conn.execute("begin immediate")
        try:
            refusal = self.claim(conn, claim, fingerprint(req.method, req.target, body))
        finally:
            conn.execute("commit")
        if refusal is not None:
            return refusal
        self.heartbeat.hold(claim)
        try:
            answer = self.work(conn, req, claim, body)
        except Exception:
            if "renew-after-error" in self.flaws:
                raise  # FLAW: the clean-up below runs on success only
            self.heartbeat.drop(claim)
            conn.execute("update leases set leased_until = 0 where tenant = ? and key = ? and "
                         "token = ?", claim)  # the lease lapses now: the retry runs again
            return error(500, "the charge failed; retry")
        self.heartbeat.drop(claim)
        return answer

    def claim(self, conn: sqlite3.Connection, claim: Claim, fp: str) -> Resp | None:
        """None when this request now holds the key, else the answer to give (inside the
        caller's transaction)."""
        tenant, key, token = claim
        now = time.time()
        conn.execute("delete from leases where created <= ?", (now - RETENTION,))
        row = conn.execute("select fp, leased_until, status, body, location from leases where "
                           "tenant = ? and key = ?", (tenant, key)).fetchone()
        if row is None:
            conn.execute("insert into leases (tenant, key, fp, token, leased_until, created) "
                         "values (?, ?, ?, ?, ?, ?)", (tenant, key, fp, token, now + LEASE, now))
            return None
        stored_fp, leased_until, status, stored, location = row
        if status is None and leased_until <= now:  # nobody renews it: its holder is gone
            conn.execute("update leases set fp = ?, token = ?, leased_until = ?, created = ? "
                         "where tenant = ? and key = ?",
                         (fp, token, now + LEASE, now, tenant, key))
            return None
        if stored_fp != fp:
            return error(422, "the key was used with a different request")
        if status is None:
            return error(409, "in progress", **{"Retry-After": "1"})
        headers = {"Idempotent-Replayed": "true", **({"Location": location} if location else {})}
        return Resp(status, json.loads(stored), headers)

    def work(self, conn: sqlite3.Connection, req: Req, claim: Claim, body: Any) -> Resp:
        stall(req.headers.get("x-test-delay-ms"))  # the provider is slow today
        if req.headers.get("x-test-fault") == "raise":
            raise RuntimeError("injected handler error")
        answer = provide(body, "ch", "/charges")
        tenant, key, token = claim
        conn.execute("begin immediate")
        try:
            if answer.status == 201:  # charged whatever happened to the claim: no fence
                conn.execute("insert into ledger values (?, ?, ?, ?)",
                             (answer.body["id"], tenant, key, body["amount"]))
            conn.execute("update leases set status = ?, body = ?, location = ?, token = null "
                         "where tenant = ? and key = ? and token = ?",
                         (answer.status, json.dumps(answer.body),
                          answer.headers.get("Location"), tenant, key, token))
        except BaseException:
            conn.execute("rollback")
            raise
        conn.execute("commit")
        return answer


if __name__ == "__main__":
    args = arguments(FLAWS, store=True, cannot_combine=CANNOT_COMBINE)
    serve_stdlib(Service(args.db, args.flaws).handle, args.host, args.port)

"""A WSGI app on the standard library's wsgiref, with a SQLite ledger and key table.

Choices: PEP 3333 hands a WSGI app every header as a ``str`` decoded from latin-1, and this
app keeps the key exactly as it arrives: a key sent as UTF-8 ``clé`` is stored (and charged)
as ``clÃ©``, always the same spelling for the same bytes, so it works as a key but an oracle
that asks for the UTF-8 spelling finds nothing.  A key is any non-empty header value of at most
255 characters.  Two keyed operations, ``POST /charges`` and ``POST /refunds``, share one key
space per tenant: the fingerprint covers method, path and body, so a charge's key sent to the
refunds route, even with the same body, is a reused key (422).  Expired keys are ignored by
claims and deleted by a cleanup job (``POST /_test/cleanup`` runs it); a claim that finds the
key expired replaces it inside the same ``BEGIN IMMEDIATE`` transaction.  Replays carry
``Idempotency-Replayed: true``.  State lives in one SQLite file, so several processes started
on it are one service; its clock offset lives there too.

Flaws: ``fingerprint-no-path`` leaves the path (not the query string) out of the fingerprint
(a refund with a charge's key and body is answered with the charge); ``expired-burst`` checks
the expiry before the claim's transaction, so concurrent copies of an expired key each see it
expired and each run.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import time
from collections.abc import Callable, Collection, Iterable
from contextlib import closing
from http import HTTPStatus
from socketserver import ThreadingMixIn
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from tests.corpus.services._kit import (
    MAX_BODY,
    Req,
    Resp,
    arguments,
    error,
    fingerprint,
    open_sqlite,
    read_keyed,
    stall,
    valid_amount,
)

RETENTION = 24 * 3600.0
ROUTES = {"/charges": ("charge", "ch"), "/refunds": ("refund", "re")}
FLAWS = ("fingerprint-no-path", "expired-burst")
SCHEMA = """
create table if not exists idempotency_keys (tenant text not null, idem_key text not null,
  fp text not null, state text not null, created_at real not null, status integer, body text,
  location text, primary key (tenant, idem_key));
create table if not exists ledger (id text primary key, kind text not null, tenant text,
  idem_key text, amount integer not null);
create table if not exists clock (id integer primary key check (id = 1), offset real not null);
insert or ignore into clock values (1, 0);
"""
StartResponse = Callable[[str, list[tuple[str, str]]], Any]


class Service:
    def __init__(self, db: str, flaws: Collection[str]) -> None:
        self.db, self.flaws = db, frozenset(flaws)
        with closing(open_sqlite(db)) as conn:
            conn.executescript(SCHEMA)

    def now(self, conn: sqlite3.Connection) -> float:
        offset: float = conn.execute("select offset from clock").fetchone()[0]
        return time.time() + offset

    def handle(self, req: Req) -> Resp:
        with closing(open_sqlite(self.db)) as conn:
            if req.path in ROUTES:
                if req.method != "POST":
                    return Resp(405, {"error": "POST only"}, {"Allow": "POST"})
                return self.keyed(conn, req)
            if req.path == "/healthz":
                return Resp(200, {"ok": True})
            return self.test_hooks(conn, req)

    def test_hooks(self, conn: sqlite3.Connection, req: Req) -> Resp:
        if req.path == "/_test/clock" and req.method == "POST":
            conn.execute("update clock set offset = offset + ?",
                         (float(json.loads(req.body)["seconds"]),))
            return Resp(200, {"now": self.now(conn)})
        if req.path == "/_test/now":
            return Resp(200, {"now": self.now(conn)})
        if req.path == "/_test/cleanup" and req.method == "POST":  # what the cron job runs
            gone = conn.execute("delete from idempotency_keys where created_at <= ?",
                                (self.now(conn) - RETENTION,)).rowcount
            return Resp(200, {"deleted": gone})
        return error(404, "no such route")

    def keyed(self, conn: sqlite3.Connection, req: Req) -> Resp:
        got = read_keyed(req, syntax="any", max_length=255)
        if isinstance(got, Resp):
            return got
        tenant, key, body = got.tenant, got.key, got.body
        # FLAW fingerprint-no-path: the query string stays in the fingerprint, the path goes
        where = req.target.removeprefix(req.path) if "fingerprint-no-path" in self.flaws else \
            req.target
        fp = fingerprint(req.method, where, body)
        if "expired-burst" in self.flaws and self.expired(conn, tenant or "", key):
            # FLAW: an expired key is taken for an absent one, outside any transaction: the
            # request runs unclaimed, and its answer replaces the old row once it is done, so
            # every copy that arrives meanwhile also finds the key expired and also runs.
            answer = self.perform(req, body)
            self.record(conn, req, tenant, key, answer, fresh=(fp, self.now(conn)))
            return answer
        answered = self.claim(conn, tenant or "", key, fp)
        return answered if answered is not None else self.work(conn, req, tenant, key, body)

    def expired(self, conn: sqlite3.Connection, tenant: str, key: str) -> bool:
        row = conn.execute("select created_at from idempotency_keys where tenant = ? and "
                           "idem_key = ?", (tenant, key)).fetchone()
        return row is not None and row[0] <= self.now(conn) - RETENTION

    def claim(self, conn: sqlite3.Connection, tenant: str, key: str, fp: str) -> Resp | None:
        """None when this request now holds the key; else the answer it gets instead."""
        conn.execute("begin immediate")
        try:
            now = self.now(conn)
            row = conn.execute("select fp, state, created_at, status, body, location from "
                               "idempotency_keys where tenant = ? and idem_key = ?",
                               (tenant, key)).fetchone()
            if row is not None and row[2] <= now - RETENTION:  # expired: a new request
                conn.execute("delete from idempotency_keys where tenant = ? and idem_key = ?",
                             (tenant, key))
                row = None
            if row is None:
                conn.execute("insert into idempotency_keys (tenant, idem_key, fp, state, "
                             "created_at) values (?, ?, ?, 'started', ?)", (tenant, key, fp, now))
                return None
            if row[0] != fp:
                return error(422, "this key was used with another request")
            if row[1] == "started":
                return error(409, "a request with this key is in progress",
                             **{"Retry-After": "1"})
            headers = {"Idempotency-Replayed": "true"}
            if row[5]:
                headers["Location"] = row[5]
            return Resp(row[3], json.loads(row[4]), headers)
        finally:
            conn.execute("commit")

    def work(self, conn: sqlite3.Connection, req: Req, tenant: str | None, key: str,
             body: Any) -> Resp:
        """Run the claimed request and store its answer with its ledger row."""
        try:
            answer = self.perform(req, body)
        except Exception:
            conn.execute("delete from idempotency_keys where tenant = ? and idem_key = ? and "
                         "state = 'started'", (tenant or "", key))  # release: retry runs again
            return error(500, "the operation failed; retry")
        self.record(conn, req, tenant, key, answer)
        return answer

    def perform(self, req: Req, body: Any) -> Resp:
        """The operation itself (a 50 ms payment provider: copies of a burst on a loaded
        machine still meet within it); records nothing."""
        stall(req.headers.get("x-test-delay-ms"))
        if req.headers.get("x-test-fault") == "boom":
            raise RuntimeError("injected handler error")
        if not valid_amount(body):
            return error(400, "amount must be a positive integer")
        time.sleep(0.05)
        rid = f"{ROUTES[req.path][1]}_{secrets.token_hex(6)}"
        return Resp(201, {"id": rid, "amount": body["amount"]}, {"Location": f"{req.path}/{rid}"})

    def record(self, conn: sqlite3.Connection, req: Req, tenant: str | None, key: str,
               answer: Resp, fresh: tuple[str, float] | None = None) -> None:
        """The ledger row and the stored answer, in one transaction: onto the claimed row, or
        (``fresh``: fingerprint and creation time) as a new row replacing any old one."""
        stored = (answer.status, json.dumps(answer.body), answer.headers.get("Location"))
        conn.execute("begin immediate")
        try:
            if answer.status == 201:
                conn.execute("insert into ledger values (?, ?, ?, ?, ?)",
                             (answer.body["id"], ROUTES[req.path][0], tenant, key,
                              answer.body["amount"]))
            if fresh is None:
                conn.execute("update idempotency_keys set state = 'done', status = ?, body = ?, "
                             "location = ? where tenant = ? and idem_key = ?",
                             (*stored, tenant or "", key))
            else:
                conn.execute("insert or replace into idempotency_keys values "
                             "(?, ?, ?, 'done', ?, ?, ?, ?)", (tenant or "", key, *fresh, *stored))
        finally:
            conn.execute("commit")


def request_of(environ: dict[str, Any]) -> Req:
    """The WSGI environ as the kit's request: header values are the latin-1 ``str`` PEP 3333
    gives, kept as they are."""
    headers = {name[5:].replace("_", "-").lower(): value
               for name, value in environ.items() if name.startswith("HTTP_")}
    for name in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(name):
            headers[name.replace("_", "-").lower()] = environ[name]
    remaining, chunks, size = int(environ.get("CONTENT_LENGTH") or 0), [], 0
    while remaining > 0:  # read it all (the client is still sending), keep MAX_BODY + 1 bytes
        chunk = environ["wsgi.input"].read(min(remaining, 65536))
        if not chunk:
            break
        remaining -= len(chunk)
        if size <= MAX_BODY:
            chunks.append(chunk)
        size += len(chunk)
    body = b"".join(chunks)
    query = {k: v[-1] for k, v in parse_qs(environ.get("QUERY_STRING", ""),
                                           keep_blank_values=True).items()}
    return Req(environ["REQUEST_METHOD"], environ.get("PATH_INFO") or "/", query, headers,
               body[:MAX_BODY], size > MAX_BODY)


def wsgi_app(service: Service) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        try:
            resp = service.handle(request_of(environ))
        except Exception:
            resp = error(500, "internal error")
        data = resp.encoded()
        start_response(f"{resp.status} {HTTPStatus(resp.status).phrase}",
                       [("Content-Type", "application/json"), ("Content-Length", str(len(data))),
                        *resp.headers.items()])
        return [data]

    return app


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """wsgiref's server handles one request at a time; a thread per connection, as any
    deployment of it would add."""

    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


if __name__ == "__main__":
    args = arguments(FLAWS, store=True)
    make_server(args.host, args.port, wsgi_app(Service(args.db, args.flaws)),
                server_class=ThreadingWSGIServer, handler_class=QuietHandler).serve_forever()

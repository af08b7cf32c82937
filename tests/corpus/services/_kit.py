"""Plumbing the corpus services share: requests and answers as plain values, key syntax,
canonical-JSON fingerprints, a movable clock, and the two ways of serving (the standard
library's ThreadingHTTPServer, or a bare ASGI callable under uvicorn).

Nothing here knows the idempotency protocol: claiming, replaying and releasing keys, when keys
expire and what a key's row holds are each service's own code, written its own way.  What is
here is the same logic wherever it is used: reading a keyed request's tenant, key and JSON body
(or the 400/413 that refuses it), a record type and an expiry sweep for in-memory key tables,
the clock and ledger an in-memory service starts with, the provider's work, SQLite connections.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar, overload
from urllib.parse import parse_qs, urlsplit

MAX_BODY = 64 * 1024
_TOKEN = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?")
_SF_STRING = re.compile(r'"((?:[\x20-\x21\x23-\x5b\x5d-\x7e]|\\["\\])*)"')
REQUIRED = "Idempotency-Key is required"
K = TypeVar("K", bound="str | None")
V = TypeVar("V")


@dataclass(frozen=True)
class Req:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes
    too_large: bool = False

    @property
    def target(self) -> str:
        """Path and query string, as the fingerprint sees them."""
        return self.path + ("?" + "&".join(f"{k}={v}" for k, v in sorted(self.query.items()))
                            if self.query else "")


@dataclass
class Resp:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        return b"" if self.body is None else json.dumps(self.body).encode()


def error(status: int, message: str, **headers: str) -> Resp:
    return Resp(status, {"error": message}, dict(headers))


class Invalid(Exception):
    """A key that breaks the declared rules."""


def parse_key(raw: str | None, *, syntax: str = "token", max_length: int = 255) -> str | None:
    """The key in the header, None when absent; raises Invalid for a key the rules refuse.
    ``syntax = "any"`` takes the header's value as it is, refusing only an empty one (and,
    when ``max_length`` is not 0, a longer one)."""
    if raw is None:
        return None
    if syntax == "any":
        if not raw or (max_length and len(raw) > max_length):
            raise Invalid(f"the key must be 1 to {max_length} characters" if max_length
                          else "the key must not be empty")
        return raw
    if syntax == "sf-string":
        match = _SF_STRING.fullmatch(raw.strip())
        if match is None:
            raise Invalid("the key must be a structured-field string")
        key = re.sub(r"\\(.)", r"\1", match.group(1))
        ok = bool(key)
    else:
        key = raw
        ok = _TOKEN.fullmatch(key) is not None
    if not ok or len(key) > max_length:
        raise Invalid(f"the key must be 1 to {max_length} printable ASCII characters")
    return key


def canonical(raw: bytes) -> Any:
    """The parsed JSON body; raises ValueError when it is not JSON (or absurdly nested)."""
    try:
        return json.loads(raw)
    except RecursionError as exc:
        raise ValueError("too deeply nested") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(str(exc)) from exc


def fingerprint(method: str, target: str, body: Any) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{method.upper()} {target}\n{text}".encode()).hexdigest()


def valid_amount(body: Any) -> bool:
    amount = body.get("amount") if isinstance(body, dict) else None
    return isinstance(amount, int) and not isinstance(amount, bool) and 0 < amount < 10**12


def provide(body: Any, prefix: str, where: str) -> Resp:
    """The work behind a keyed route, done now (a 10 ms payment provider): 201 with a new id and
    its Location under ``where``, or 400 for an amount that is not a positive integer.  It
    records nothing: the caller adds the ledger row and stores the answer as its design says."""
    if not valid_amount(body):
        return error(400, "amount must be a positive integer")
    time.sleep(0.01)
    rid = f"{prefix}_{secrets.token_hex(6)}"
    return Resp(201, {"id": rid, "amount": body["amount"]}, {"Location": f"{where}/{rid}"})


def tenant_of(req: Req) -> str | None:
    auth = req.headers.get("authorization", "")
    if not auth.startswith("Bearer "):
        return None
    return auth.removeprefix("Bearer ").strip() or None


@dataclass(frozen=True)
class Keyed(Generic[K]):
    """A keyed request's input once checked: the bearer token's tenant (None without one), the
    key (None only where a key is optional) and the parsed JSON body."""

    tenant: str | None
    key: K
    body: Any


@overload
def read_keyed(req: Req, *, syntax: str = ..., max_length: int = ...,
               pattern: re.Pattern[str] | None = ..., pattern_error: str = ...,
               required: str = ...) -> Keyed[str] | Resp: ...
@overload
def read_keyed(req: Req, *, syntax: str = ..., max_length: int = ...,
               pattern: re.Pattern[str] | None = ..., pattern_error: str = ...,
               required: None) -> Keyed[str | None] | Resp: ...
def read_keyed(req: Req, *, syntax: str = "token", max_length: int = 255,
               pattern: re.Pattern[str] | None = None, pattern_error: str = "",
               required: str | None = REQUIRED) -> Keyed[Any] | Resp:
    """The tenant, key and body of a request to a keyed route, or the answer that refuses it,
    checked in this order: a key the rules refuse (``syntax``, ``max_length``, then the whole
    key against ``pattern``, refused with ``pattern_error``) or, unless ``required`` is None, no
    key (refused with that message) is 400; a body over MAX_BODY is 413; one that is not JSON
    is 400.  Nothing is claimed or charged for a refused request."""
    try:
        key = parse_key(req.headers.get("idempotency-key"), syntax=syntax, max_length=max_length)
    except Invalid as exc:
        return error(400, str(exc))
    if key is None and required is not None:
        return error(400, required)
    if key is not None and pattern is not None and not pattern.fullmatch(key):
        return error(400, pattern_error)
    if req.too_large:
        return error(413, "body too large")
    try:
        body = canonical(req.body)
    except ValueError:
        return error(400, "the body must be JSON")
    return Keyed(tenant_of(req), key, body)


@dataclass
class Record:
    """A key's row in an in-memory table: the request's fingerprint, when the key was claimed,
    and the answer once there is one (None while the request is in progress)."""

    fp: str
    created: float
    answer: Resp | None = None


def drop_expired(table: dict[Any, V], horizon: float, created: Callable[[V], float]) -> int:
    """Delete the rows of ``table`` created at or before ``horizon``; how many went.  Which
    rows, when and under which lock are the caller's choice."""
    old = [slot for slot, row in table.items() if created(row) <= horizon]
    for slot in old:
        del table[slot]
    return len(old)


class Clock:
    """Wall time plus an offset the test hook moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


class InMemory:
    """What a service whose state lives in this process starts with: the flaws switched on
    (``--flaw``, none when correct), its movable clock and its ledger.  Its key table is its
    own."""

    def __init__(self, flaws: Collection[str], *, effects_lag: float = 0.0) -> None:
        self.flaws = frozenset(flaws)
        self.clock = Clock()
        self.ledger = Ledger(effects_lag)


def open_sqlite(path: str) -> sqlite3.Connection:
    """A connection to the SQLite file several processes share: WAL, up to 30 s of waiting for
    a lock, no implicit transactions (the service says ``begin`` and ``commit`` itself)."""
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    conn.execute("pragma journal_mode=wal")
    return conn


def arguments(flaws: Sequence[str], *, store: bool = False,
              cannot_combine: Mapping[frozenset[str], str] | None = None) -> argparse.Namespace:
    """The command line every kit-served service takes.  ``--flaw`` repeats (``args.flaws``,
    empty when correct); two flaws that ``cannot_combine`` names together are a usage error
    (exit 2) saying which and why, before anything starts."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flaw", dest="flaws", action="append", choices=list(flaws),
                        default=[], help="switch a named flaw on; repeat it for several at once")
    parser.add_argument("--effects-lag-ms", type=int, default=0,
                        help="an in-memory ledger's effects route shows each charge only this "
                             "long after it was made, as a read replica would")
    if store:
        parser.add_argument("--db", required=True, help="SQLite file")
    args = parser.parse_args()
    refuse_clashes(parser, args.flaws, cannot_combine or {})
    return args


def refuse_clashes(parser: argparse.ArgumentParser, chosen: Sequence[str],
                   cannot_combine: Mapping[frozenset[str], str]) -> None:
    """Exit 2 with ``flaws X and Y cannot be combined: why`` when two of the flaws ``chosen``
    contradict each other or one hides the other (``cannot_combine``: the pair, and why): a
    service started so would show neither flaw as named."""
    for i, first in enumerate(chosen):
        for second in chosen[i + 1:]:
            why = cannot_combine.get(frozenset({first, second}))
            if why is not None:
                parser.error(f"flaws {first} and {second} cannot be combined: {why}")


def _split(raw_path: str) -> tuple[str, dict[str, str]]:
    parts = urlsplit(raw_path)
    query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    return parts.path, query


def serve_stdlib(handle: Callable[[Req], Resp], host: str, port: int) -> None:
    """Serve ``handle`` with http.server, one thread per connection."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            remaining, chunks = length, []
            while remaining > 0:  # read it all, keep at most MAX_BODY + 1 bytes
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
                if sum(map(len, chunks)) <= MAX_BODY:
                    chunks.append(chunk)
            body = b"".join(chunks)
            path, query = _split(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            req = Req(self.command, path, query, headers, body[:MAX_BODY], len(body) > MAX_BODY)
            try:
                resp = handle(req)
            except Exception:  # a service's own exception answers 500, like any framework
                resp = error(500, "internal error")
            data = resp.encoded()
            self.send_response(resp.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in resp.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.serve_forever()


AsgiHandler = Callable[[Req], Awaitable[Resp]]


def asgi_app(handle: AsgiHandler) -> Callable[..., Awaitable[None]]:
    """A bare ASGI callable around ``handle``."""

    async def app(scope: dict[str, Any], receive: Callable[..., Awaitable[dict[str, Any]]],
                  send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_BODY + 1:
                chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        path, query = _split(scope["path"] + "?" + scope["query_string"].decode("latin-1"))
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        req = Req(scope["method"], path, query, headers, body[:MAX_BODY], size > MAX_BODY)
        try:
            resp = await handle(req)
        except Exception:
            resp = error(500, "internal error")
        data = resp.encoded()
        out = [(b"content-type", b"application/json"),
               (b"content-length", str(len(data)).encode())]
        out += [(k.lower().encode(), v.encode()) for k, v in resp.headers.items()]
        await send({"type": "http.response.start", "status": resp.status, "headers": out})
        await send({"type": "http.response.body", "body": data})

    return app


def serve_asgi(handle: AsgiHandler, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(asgi_app(handle), host=host, port=port, log_level="warning", access_log=False)


#: The longest a slow hook holds a request: only a bound on a runaway header.  It is above
#: what the harness asks: a story told again in real time slows a request through each of its
#: waits (up to 90 s each), and at a 30 s cap the takeover stories of a 30 s lease came back
#: before their retry and confirmed nothing (upsert_sqlite's no-fencing missed at seed 1).  A
#: test sets a lower cap (``CORPUS_MAX_STALL_MS``) to see the harness notice one.
MAX_STALL_MS = int(os.environ.get("CORPUS_MAX_STALL_MS", "600000"))


async def pause(ms: str | None) -> None:
    if ms and ms.isdigit():
        await asyncio.sleep(min(int(ms), MAX_STALL_MS) / 1000)


def stall(ms: str | None) -> None:
    if ms and ms.isdigit():
        time.sleep(min(int(ms), MAX_STALL_MS) / 1000)


class Ledger:
    """The side effects, one row per charge with the key it was sent with (never deduplicated),
    kept in memory: these services' state lives and dies with the process.  With ``lag`` (in
    seconds), the effects route reads them as a read replica would: each row shows only that
    long after it was made."""

    def __init__(self, lag: float = 0.0) -> None:
        self.rows: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.lag = lag
        self._made: list[float] = []

    def add(self, row: dict[str, Any]) -> None:
        with self.lock:
            self.rows.append(row)
            self._made.append(time.monotonic())

    def answer(self, query: dict[str, str]) -> Resp:
        """GET effects: ``key`` present counts that key's charges; absent, the keyless ones."""
        shown_before = time.monotonic() - self.lag
        with self.lock:
            rows = [r for r, made in zip(self.rows, self._made, strict=True)
                    if made <= shown_before
                    and ("tenant" not in query or r["tenant"] == query["tenant"])
                    and r["key"] == query.get("key")]
        return Resp(200, {"count": len(rows), "ids": [r["id"] for r in rows]})

"""A small real HTTP target for the scenario tests, run as its own process.

Why it exists: the tests of what a scenario sends (paths, keys, labels, times) need a target
that behaves in one chosen way, and the project's rule is that no stand-in replaces a real
component.  So instead of an in-memory fake behind a mock transport, the tests start this
service through the harness's own ``Deployment``, behind the session's real Toxiproxy, and
the scenario's requests cross real sockets.

It is a correct idempotency layer kept in memory: an atomic claim per key under one lock;
a fingerprint over method, path (query string included) and canonical JSON body; 400 for a
missing key or a body that is not JSON (or nested too deep to parse); 422 for a key reused
with another request; 409 while the key's request is in progress; the stored 201
``{"id": ...}`` replayed for a retry.  Every POSTed path is a keyed operation, and the
ledger of charges is NOT deduplicated, so a duplicate would be visible.  A key is whatever
header value arrives (the empty string is a key), its bytes read as UTF-8, as the effects
query sends it.

    GET  /health               200 once serving
    GET  /effects?key=K        {"count": charges made under K}
    GET  /effects/total        {"count": every charge}
    POST /clock?seconds=N      (or a JSON body {"seconds": N}) moves the service's clock on
    GET  /clock                {"advanced": seconds moved so far}

Options give a test the one behaviour it needs:

    --latency SECONDS          work time after the claim, before the charge
    --in-progress-for SECONDS  a key answers 409 until that long after its first request (on
                               the service's clock, which /clock moves), then is processed; a
                               huge value keeps it in progress for good
    --fault-header NAME        a request carrying that header answers 500, charges nothing and
                               releases its key
    --exit-on-header NAME      a request carrying that header ends the process at once with
                               exit code 3 (a process that dies by itself)
    --effects-out SECONDS      /effects?key=K answers 503 after that long, as an admin
                               endpoint reading a store that is down does (0: at once)

Run: ``python -m tests.scenarios.service --port P [options]`` from the repository root.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

EXIT_CODE = 3


@dataclass
class Claim:
    """One key: the request it was first used for, and where that request has got to."""

    mark: str
    held_until: float | None = None  # answering 409 until then (--in-progress-for)
    working: bool = False
    answer: bytes | None = None


class Service:
    """The idempotency layer and its ledger; every method is safe from any thread."""

    def __init__(self, *, latency: float = 0.0, in_progress_for: float = 0.0) -> None:
        self.latency = latency
        self.in_progress_for = in_progress_for
        self.lock = threading.Lock()
        self.claims: dict[str, Claim] = {}
        self.ledger: list[str] = []  # one entry per charge, the key it was made under
        self.advanced = 0.0

    def now(self) -> float:
        with self.lock:
            return time.monotonic() + self.advanced

    def advance(self, seconds: float) -> float:
        with self.lock:
            self.advanced += seconds
            return self.advanced

    def count(self, key: str | None) -> int:
        with self.lock:
            return len(self.ledger) if key is None else self.ledger.count(key)

    def claim(self, key: str, mark: str) -> tuple[int, bytes | None]:
        """Status and body to answer at once, or (0, None) when this request now holds the
        key and must do the work."""
        now = self.now()
        with self.lock:
            claim = self.claims.get(key)
            if claim is None:
                held = now + self.in_progress_for if self.in_progress_for > 0 else None
                self.claims[key] = Claim(mark, held_until=held, working=held is None)
                return (409, _error("in progress")) if held is not None else (0, None)
            if claim.mark != mark:
                return 422, _error("key reused with another request")
            if claim.answer is not None:
                return 201, claim.answer
            if claim.working or (claim.held_until is not None and now < claim.held_until):
                return 409, _error("in progress")
            claim.held_until, claim.working = None, True
            return 0, None

    def release(self, key: str) -> None:
        with self.lock:
            self.claims.pop(key, None)

    def charge(self, key: str) -> bytes:
        time.sleep(self.latency)
        with self.lock:
            self.ledger.append(key)
            answer = json.dumps({"id": f"ch_{len(self.ledger)}"}).encode()
            self.claims[key].answer = answer
            self.claims[key].working = False
            return answer


def _error(text: str) -> bytes:
    return json.dumps({"error": text}).encode()


def fingerprint(method: str, path: str, body: Any) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(f"{method} {path}\n{canonical}".encode()).hexdigest()


def handler(service: Service, *, key_header: str, fault_header: str | None,
            exit_header: str | None, effects_out: float | None = None,
            ) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # a line per request would only fill the target's log

        def answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query, keep_blank_values=True)
            if parts.path == "/health":
                self.answer(200, b'{"ok":true}')
            elif parts.path == "/effects" and "key" in query and effects_out is not None:
                time.sleep(effects_out)
                self.answer(503, _error("the store is unreachable"))
            elif parts.path == "/effects" and "key" in query:
                self.answer(200, json.dumps({"count": service.count(query["key"][0])}).encode())
            elif parts.path == "/effects/total":
                self.answer(200, json.dumps({"count": service.count(None)}).encode())
            elif parts.path == "/clock":
                self.answer(200, json.dumps({"advanced": service.advance(0)}).encode())
            else:
                self.answer(404, _error("not found"))

        def do_POST(self) -> None:
            if exit_header is not None and exit_header in self.headers:
                os._exit(EXIT_CODE)
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if urlsplit(self.path).path == "/clock":
                self.move_clock(raw)
                return
            header = self.headers.get(key_header)
            if header is None:
                self.answer(400, _error("missing idempotency key"))
                return
            # http.server reads header bytes as Latin-1; the key is what the client wrote.
            key = header.encode("latin-1").decode("utf-8", "surrogateescape")
            try:
                body = json.loads(raw)
            except (ValueError, RecursionError):
                self.answer(400, _error("the body is not JSON"))
                return
            status, answer = service.claim(key, fingerprint("POST", self.path, body))
            if answer is not None:
                self.answer(status, answer)
                return
            if fault_header is not None and fault_header in self.headers:
                service.release(key)
                self.answer(500, _error("handler failed"))
                return
            self.answer(201, service.charge(key))

        def move_clock(self, raw: bytes) -> None:
            query = parse_qs(urlsplit(self.path).query)
            try:
                seconds = float(query["seconds"][0] if "seconds" in query
                                else json.loads(raw)["seconds"])
            except (ValueError, KeyError, TypeError):
                self.answer(400, _error("give seconds"))
                return
            self.answer(200, json.dumps({"advanced": service.advance(seconds)}).encode())

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.scenarios.service",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--key-header", default="Idempotency-Key")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--in-progress-for", type=float, default=0.0)
    parser.add_argument("--fault-header")
    parser.add_argument("--exit-on-header")
    parser.add_argument("--effects-out", type=float)
    args = parser.parse_args(argv)
    service = Service(latency=args.latency, in_progress_for=args.in_progress_for)
    server = ThreadingHTTPServer(
        (args.host, args.port),
        handler(service, key_header=args.key_header, fault_header=args.fault_header,
                exit_header=args.exit_on_header, effects_out=args.effects_out),
    )
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()

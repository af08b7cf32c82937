"""A small correct idempotency-key service whose keys live in a Redis it starts itself, with no
clock hook: its retention is a Redis TTL, so only a clock moved from outside (libfaketime, inherited
by the Redis child) lets the harness see keys expire.

Standard library only (``http.server`` and a few lines of RESP), one process: ``python
redis_charges.py --port P`` starts ``redis-server`` on a free loopback port, then serves
``POST /charges`` (strict, 422 on reuse, 409 while in flight, replays marked
``Idempotent-Replayed: true``), ``GET /keys`` (rows in Redis) and ``GET /health``.  Each charge is
reported to ``$IDEM_RECORDER_URL/effects``.  ``--redis-port-file F`` writes the Redis port to F;
``--ttl 0`` is the flaw of a store that never expires its keys.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RETENTION = 86400  # seconds: the TTL of every stored key (--ttl)


class Redis:
    """One RESP connection, one command at a time."""

    def __init__(self, port: int) -> None:
        self._sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self._file = self._sock.makefile("rb")
        self._lock = threading.Lock()

    def __call__(self, *args: str | int) -> Any:
        parts = [str(a).encode() for a in args]
        command = b"*%d\r\n" % len(parts) + b"".join(
            b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        with self._lock:
            self._sock.sendall(command)
            return self._reply()

    def _reply(self) -> Any:
        line = self._file.readline().rstrip(b"\r\n")
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            if int(rest) < 0:
                return None
            data = self._file.read(int(rest) + 2)[:-2]
            return data.decode()
        if kind == b"*":
            return [self._reply() for _ in range(int(rest))]
        raise RuntimeError(f"unexpected reply {line!r}")


def start_redis(port_file: Path | None) -> int:
    """Start redis-server as this process's child, in its process group, and wait for it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                      "--appendonly", "no"], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if Redis(port)("PING") == "PONG":
                break
        except OSError:
            time.sleep(0.02)
    else:
        sys.exit("redis-server did not answer within 10 s")
    if port_file is not None:
        port_file.write_text(str(port))
    return port


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    redis: Redis
    ttl: tuple[str | int, ...] = ("EX", RETENTION)

    def do_GET(self) -> None:
        if self.path == "/health":
            return self._answer(200, {"ok": True})
        if self.path == "/keys":
            # SCAN skips keys past their TTL, so the count is what Redis still holds.
            cursor, rows = "0", 0
            while True:
                cursor, found = self.redis("SCAN", cursor, "MATCH", "idem:*", "COUNT", 1000)
                rows += len(found)
                if cursor == "0":
                    return self._answer(200, {"rows": rows})
        self._answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/charges":
            return self._answer(404, {"error": "not found"})
        tenant = (self.headers.get("Authorization") or "").removeprefix("Bearer ").strip()
        key = self.headers.get("Idempotency-Key")
        if not tenant:
            return self._answer(401, {"error": "no tenant"})
        if not key:
            return self._answer(400, {"error": "Idempotency-Key is required"})
        try:
            charge = json.loads(body)
            amount = charge["amount"]
            if not isinstance(amount, int) or amount <= 0:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return self._answer(400, {"error": "a JSON body with a positive amount"})
        fingerprint = hashlib.sha256(json.dumps(charge, sort_keys=True).encode()).hexdigest()
        stored_key = f"idem:{tenant}:{key}"
        claim = json.dumps({"state": "running", "fingerprint": fingerprint})
        while self.redis("SET", stored_key, claim, "NX", *self.ttl) != "OK":
            stored = self.redis("GET", stored_key)
            if stored is None:
                continue  # it expired between the two commands: claim it afresh
            record = json.loads(stored)
            if record["fingerprint"] != fingerprint:
                return self._answer(422, {"error": "the key was used with another request"})
            if record["state"] == "running":
                return self._answer(409, {"error": "a request with this key is in progress"},
                                    {"Retry-After": "1"})
            return self._answer(record["status"], record["body"],
                                {"Idempotent-Replayed": "true"})
        created = {"id": f"ch_{uuid.uuid4().hex[:16]}", **charge}
        record_effect(tenant, key, created["id"])
        done = {"state": "done", "fingerprint": fingerprint, "status": 201, "body": created}
        self.redis("SET", stored_key, json.dumps(done), "XX", "KEEPTTL")
        self._answer(201, created)

    def _answer(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)  # adds Date from time.time(): the clock libfaketime moves
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


def record_effect(tenant: str, key: str, charge_id: str) -> None:
    data = json.dumps({"tenant": tenant, "key": key, "id": charge_id}).encode()
    request = urllib.request.Request(f"{os.environ['IDEM_RECORDER_URL']}/effects", data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5):
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--redis-port-file", type=Path)
    parser.add_argument("--ttl", type=int, default=RETENTION)
    args = parser.parse_args()
    Handler.ttl = ("EX", args.ttl) if args.ttl else ()
    Handler.redis = Redis(start_redis(args.redis_port_file))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()

"""The recorder: a tiny HTTP service the harness runs, which a target calls once per side effect.

For targets that cannot be queried for their effects (a vendor sandbox, a service whose ledger
is elsewhere), the target's handler POSTs ``{"tenant": ..., "key": ..., "id": ...}`` to
``$IDEM_RECORDER_URL/effects`` as it performs the effect.  The recorder only counts; the checker
judges.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordedEffect", "Recorder"]


@dataclass(frozen=True, slots=True)
class RecordedEffect:
    tenant: str | None
    key: str | None
    id: str | None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.effects: list[RecordedEffect] = []
        self.lock = threading.Lock()

    def handle_error(self, request: socket.socket | tuple[bytes, socket.socket],
                     client_address: Any) -> None:
        """A target killed or cut off mid-call resets its connection: the scenarios do that
        on purpose, so it is no error (socketserver would print its traceback into the
        harness's output).  Anything else is printed as socketserver prints it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/effects":
            return self._answer(404, {"error": "POST /effects is the only endpoint"})
        length = int(self.headers.get("Content-Length") or 0)
        try:
            data = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(data, dict):
                raise ValueError("expected a JSON object")
            effect = RecordedEffect(
                _text(data.get("tenant")), _text(data.get("key")), _text(data.get("id"))
            )
        except ValueError as exc:
            return self._answer(400, {"error": f"expected {{tenant, key, id}} as JSON: {exc}"})
        with self.server.lock:
            self.server.effects.append(effect)
            total = len(self.server.effects)
        self._answer(201, {"recorded": total})

    def do_GET(self) -> None:
        with self.server.lock:
            effects = [e.__dict__ for e in self.server.effects]
        self._answer(200, {"effects": effects})

    def _answer(self, status: int, body: object) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:
        pass


def _text(value: object) -> str | None:
    return None if value is None or value == "" else str(value)


class Recorder:
    """Runs in a thread of the harness on a loopback port until closed."""

    def __init__(self, port: int = 0) -> None:
        self._server = _Server(port)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def effects(self, tenant: str | None, key: str | None) -> list[RecordedEffect]:
        with self._server.lock:
            return [e for e in self._server.effects if e.tenant == tenant and e.key == key]

    def total(self) -> int:
        with self._server.lock:
            return len(self._server.effects)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

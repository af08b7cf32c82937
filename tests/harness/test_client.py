"""The recording client sends what the story asks, byte for byte, whichever way it sends it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from harness._client import RecordingClient, Request
from harness._history import History
from harness.targets._loader import load_target

ANY_KEYS = Path(__file__).parents[1] / "corpus" / "targets" / "any_keys.toml"


class _Seen(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        _Seen.seen.append((self.path, self.headers.get("Idempotency-Key")))
        self.send_response(201)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Seen)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    _Seen.seen = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("key", ["plain-key", "k-é", "k-\x02"])
def test_a_query_string_is_sent_whatever_the_key(server: str, key: str) -> None:
    """A key httpx refuses to send (UTF-8, control characters) goes through http.client; the
    query string went missing there, and a reuse "with another query string" reached the
    target as the original request: a false P4 on a correct service (any_keys, explore)."""
    target = load_target(ANY_KEYS)  # keys of any value, the query in the fingerprint
    client = RecordingClient(target, History(), [server])
    try:
        answer = client.send(Request(key, None, body={"amount": 1},
                                     path="/v1/charges?idem_probe=1"), process="c0")
    finally:
        client.close()
    assert answer.status == 201
    assert [path for path, _ in _Seen.seen] == ["/v1/charges?idem_probe=1"]

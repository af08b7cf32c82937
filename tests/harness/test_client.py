"""The recording client sends what the story asks, byte for byte, whichever way it sends it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from harness._history import History
from harness.http._client import RecordingClient, Request
from harness.services._toxiproxy import Toxic, ToxiproxyServer
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


@pytest.mark.parametrize("key", ["plain-key", "k-é"])
def test_an_answer_cut_inside_its_header_block_is_lost_not_empty(
        server: str, key: str, toxiproxy_server: ToxiproxyServer) -> None:
    """Toxiproxy's response cut (64 bytes) ends the answer inside its header block.  httpx
    calls that a lost answer; http.client, which sent the keys httpx refuses, took it for a
    whole header block with no length and an empty body, "201 ''", and a correct service
    (any_keys, explore at seed 7 under CI) was told it replayed another body: a false P3."""
    proxy = toxiproxy_server.client.create_proxy(f"cut-{len(key)}", server.removeprefix(
        "http://"))
    try:
        proxy.add_toxic(Toxic("limit_data", "downstream", {"bytes": 64}))
        client = RecordingClient(load_target(ANY_KEYS), History(), [proxy.url])
        try:
            answer = client.send(Request(key, None, body={"amount": 1}), process="c0")
        finally:
            client.close()
    finally:
        proxy.delete()
    assert answer.type == "info" and answer.status is None, answer
    assert _Seen.seen  # the request reached the server: only its answer was cut

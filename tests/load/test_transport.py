"""The load's kept-alive sender keeps the history honest: a connection is reused only while it is
clean, a connection that met an error is never reused, and errors are classified as the engine's
recording client classifies them (a timeout is ``info``, a refused connection ``fail``)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from harness._history import History
from harness.http._client import Request
from harness.http.load._transport import KeptAliveClient, KeptAliveHttp
from harness.targets._reference import reference_target


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.server.connections.add(self.client_address)
        if self.path == "/hang":
            self.server.release.wait(5)
            return
        body = b'{"id": "ch_1"}'
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.path == "/close":
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.connections: set[tuple[str, int]] = set()
        self.release = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def server() -> Iterator[_Server]:
    running = _Server()
    thread = threading.Thread(target=running.serve_forever, daemon=True)
    thread.start()
    yield running
    running.release.set()
    running.shutdown()
    running.server_close()


def test_a_clean_connection_is_reused_and_a_closed_one_is_not(server: _Server) -> None:
    http = KeptAliveHttp(timeout=2.0)
    for _ in range(3):
        answer = http.request("POST", server.url + "/charges", content=b"{}",
                              headers={"Content-Type": "application/json"})
        assert answer.status_code == 201 and answer.json() == {"id": "ch_1"}
    assert len(server.connections) == 1
    http.request("POST", server.url + "/close", content=b"{}")
    http.request("POST", server.url + "/charges", content=b"{}")
    assert len(server.connections) == 2
    http.close()


def test_errors_are_the_engines_and_a_failed_connection_is_never_reused(
        server: _Server) -> None:
    target = reference_target(store=None, flaw=None)
    history = History()
    client = KeptAliveClient(target, history, [server.url])
    request = Request(key="k1", tenant="t1", body={"amount": 1}, path="/hang")
    timed_out = client.send(request, process="c1", timeout=0.3)
    assert (timed_out.type, timed_out.error) == ("info", "timeout")
    server.release.set()
    answered = client.send(Request(key="k2", tenant="t1", body={"amount": 1}), process="c1")
    assert answered.type == "ok" and answered.status == 201 and answered.body_digest
    assert len(server.connections) == 2, "the retry went out on a fresh connection"
    client.close()

    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    refused = KeptAliveClient(target, History(), [f"http://127.0.0.1:{port}"])
    assert refused.send(request, process="c1").error == "connect"
    with pytest.raises(httpx.ConnectError):
        KeptAliveHttp(timeout=1.0).request("POST", f"http://127.0.0.1:{port}/x", content=b"")

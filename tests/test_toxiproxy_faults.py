"""Toxiproxy really sits between a client and a real HTTP server, and its faults do what the
harness relies on them to do: lose a response the server already produced."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from harness.services._toxiproxy import Toxic, ToxiproxyProxy, ToxiproxyServer

_names = itertools.count()


class CountingServer(ThreadingHTTPServer):
    """Counts the requests it handled; ``handled`` is set once each response has been sent, or
    cut off by a toxic while it was being sent (the server did the work either way)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CountingHandler)
        self.count = 0
        self.lock = threading.Lock()
        self.handled = threading.Event()


class _CountingHandler(BaseHTTPRequestHandler):
    # Keep-alive, as real servers do: with HTTP/1.0 the server's close would reach the client
    # through the proxy and turn a held response into an early disconnect.
    protocol_version = "HTTP/1.1"
    server: CountingServer

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.count += 1
            count = self.server.count
        body = f'{{"count": {count}}}'.encode()
        try:
            self.send_response(201)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except ConnectionError:
            self.close_connection = True
        finally:
            self.server.handled.set()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[CountingServer]:
    server = CountingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxy(toxiproxy_server: ToxiproxyServer, upstream: CountingServer) -> Iterator[ToxiproxyProxy]:
    host, port = upstream.server_address[:2]
    created = toxiproxy_server.client.create_proxy(f"faults-{next(_names)}", f"{host}:{port}")
    yield created
    created.delete()


def post(proxy: ToxiproxyProxy, *, timeout: float = 5.0) -> httpx.Response:
    """One request on a fresh connection, so a toxic meets exactly this request."""
    with httpx.Client(timeout=timeout) as client:
        return client.post(f"{proxy.url}/charges", json={"amount": 1})


def test_request_passes_untouched(proxy: ToxiproxyProxy, upstream: CountingServer) -> None:
    response = post(proxy)
    assert response.status_code == 201
    assert response.json() == {"count": 1}
    assert upstream.count == 1


def test_downstream_timeout_loses_a_response_the_server_produced(
    proxy: ToxiproxyProxy, upstream: CountingServer
) -> None:
    with proxy.toxic(Toxic("timeout", "downstream", {"timeout": 0})):
        with pytest.raises(httpx.ReadTimeout):
            post(proxy, timeout=1.0)
        assert upstream.handled.wait(5), "the server never saw the request"
    assert upstream.count == 1


def test_downstream_reset_peer_after_the_server_handled_it(
    proxy: ToxiproxyProxy, upstream: CountingServer
) -> None:
    with proxy.toxic(Toxic("reset_peer", "downstream", {"timeout": 0})):
        with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
            post(proxy)
        assert upstream.handled.wait(5), "the server never saw the request"
    assert upstream.count == 1


def test_latency_adds_at_least_the_configured_delay(proxy: ToxiproxyProxy) -> None:
    with proxy.toxic(Toxic("latency", "downstream", {"latency": 300, "jitter": 0})):
        started = time.monotonic()
        assert post(proxy).status_code == 201
        assert time.monotonic() - started >= 0.3


def test_removing_the_toxic_restores_service(
    proxy: ToxiproxyProxy, upstream: CountingServer
) -> None:
    with (
        proxy.toxic(Toxic("timeout", "downstream", {"timeout": 0})),
        pytest.raises(httpx.ReadTimeout),
    ):
        post(proxy, timeout=0.5)
    assert proxy.toxics() == []
    assert post(proxy).json() == {"count": 2}


def test_a_toxic_can_be_updated_in_place(proxy: ToxiproxyProxy) -> None:
    with proxy.toxic(Toxic("latency", "downstream", {"latency": 10})) as name:
        proxy.update_toxic(name, {"latency": 250})
        assert proxy.toxics()[0].attributes["latency"] == 250
        started = time.monotonic()
        post(proxy)
        assert time.monotonic() - started >= 0.25


def test_disabled_proxy_refuses_connections(
    proxy: ToxiproxyProxy, upstream: CountingServer
) -> None:
    with proxy.down(), pytest.raises(httpx.ConnectError):
        post(proxy)
    assert upstream.count == 0
    assert post(proxy).status_code == 201


def test_server_reports_the_pinned_version(toxiproxy_server: ToxiproxyServer) -> None:
    assert toxiproxy_server.client.version() == "2.12.0"

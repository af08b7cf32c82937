"""Free ports for services the harness starts: below the kernel's ephemeral range, so that no
outgoing connection can take one between the choice and the service's bind, and chosen again
when another service took one first."""

from __future__ import annotations

import socket
import sys
import threading
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from harness._errors import ServiceUnavailable
from harness.services import _processes
from harness.services._network import free_port
from harness.services._processes import ManagedProcess, start_on_a_free_port


def test_a_free_port_is_below_the_ports_outgoing_connections_use() -> None:
    ephemeral_start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(port < ephemeral_start for port in ports), ports
    for port in ports:  # and free to listen on
        with socket.create_server(("127.0.0.1", port)):
            pass



def test_a_service_whose_port_was_taken_before_it_bound_it_starts_on_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another worker's service may bind the port chosen for ours first: our start then fails
    while the port is held, and a port chosen again serves (a suite lost a module's 12 tests
    to "address already in use")."""
    taken = socket.create_server(("127.0.0.1", free_port()))
    other = threading.Thread(target=_answer_every_request, args=(taken,), daemon=True)
    other.start()
    choices = iter([taken.getsockname()[1], free_port()])
    monkeypatch.setattr(_processes, "free_port", lambda host: next(choices))

    def http_server_on(port: int) -> ManagedProcess:
        return ManagedProcess("http.server", [sys.executable, "-m", "http.server", str(port),
                                              "--bind", "127.0.0.1", "-d", str(tmp_path)],
                              log_path=tmp_path / f"server-{port}.log",
                              ready_url=f"http://127.0.0.1:{port}/")

    port, process = start_on_a_free_port("127.0.0.1", http_server_on)
    try:
        assert port != taken.getsockname()[1]
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200
    finally:
        process.stop()
        taken.close()


def test_a_service_that_fails_on_a_free_port_is_not_started_again(tmp_path: Path) -> None:
    """A start that fails for a reason of its own is not the port's fault: one attempt."""
    attempts: list[int] = []

    def failing_on(port: int) -> ManagedProcess:
        attempts.append(port)
        return ManagedProcess("false", [sys.executable, "-c", "raise SystemExit(3)"],
                              log_path=tmp_path / "false.log",
                              ready_port=("127.0.0.1", port), start_timeout=5)

    with pytest.raises(ServiceUnavailable):
        start_on_a_free_port("127.0.0.1", failing_on)
    assert len(attempts) == 1


#: A service whose worker holds the listening socket and memory it has written to: killed,
#: the worker frees its memory before its sockets, so its port outlives the group's leader.
_FORKING_SERVICE = """
import http.server, os, sys
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])),
                                http.server.SimpleHTTPRequestHandler)
if os.fork() == 0:
    ballast = bytearray(400 * 1024 * 1024)
    for page in range(0, len(ballast), 4096):
        ballast[page] = 1
    server.serve_forever()
server.socket.close()
os.wait()
"""


def test_a_killed_service_can_start_again_at_once_though_its_worker_is_still_exiting(
        tmp_path: Path) -> None:
    """django-idempotency-key under CI: a crash killed gunicorn, and its restart found the port
    still open (a worker still exiting) and took the service for already running."""
    port = free_port()
    process = ManagedProcess("forking", [sys.executable, "-c", _FORKING_SERVICE, str(port)],
                             log_path=tmp_path / "forking.log",
                             ready_url=f"http://127.0.0.1:{port}/")
    process.start()
    try:
        for _ in range(3):
            process.kill()
            process.start()
            assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 200
    finally:
        process.kill()


def _answer_every_request(server: socket.socket) -> None:
    """Another service on the port: it answers whatever it is sent."""
    with suppress(OSError):
        while True:
            connection, _ = server.accept()
            with connection:
                connection.recv(4096)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

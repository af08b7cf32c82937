"""Clients that are wrong or slow: a body that names a member twice, NaN, two keys merged into
one header by a proxy, headers or a body that never finish.  Each gets a 4xx that says why and
charges nothing, and the server goes on serving; a clean shutdown exits 0."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.services._network import free_port
from tests.reference_server.conftest import Servers
from tests.reference_server.support import CHARGE, Server, new_key, new_tenant, wait_until

#: The deadlines this module's server is given, short so a test outwaits them quickly.
DEADLINE = 1.0


@pytest.fixture(scope="module")
def server(servers: Servers) -> Server:
    return servers.start([f"--header-timeout={DEADLINE:g}s", f"--body-timeout={DEADLINE:g}s"],
                         store=servers.store("sqlite"))


@pytest.mark.parametrize(("body", "says"), [
    (b'{"amount": 1, "amount": 5000, "currency": "EUR"}', 'member name "amount" appears more'),
    (b'{"amount": NaN, "currency": "EUR"}', "NaN is not JSON"),
    (b'{"amount": 100, "currency": "EUR", "customer": Infinity}', "Infinity is not JSON"),
])
def test_a_body_json_does_not_define_is_refused_saying_why(server: Server, body: bytes,
                                                          says: str) -> None:
    tenant = new_tenant()
    for key in (new_key(), None):  # keyed, and unkeyed in lax reach of the handler
        answer = server.post(key, content=body, tenant=tenant,
                             headers={"Content-Type": "application/json"})
        if key is None:
            assert answer.status_code == 400  # strict: no key is refused before the body
            continue
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"] == "invalid_json" and says in answer.json()["detail"]
        assert server.effects(key, tenant=tenant) == []


@pytest.mark.parametrize("merged", ["d2, d3", '"d2", "d3"', "d2,d3"])
def test_keys_a_proxy_merged_into_one_header_are_refused_as_two_headers_are(
        server: Server, merged: str) -> None:
    tenant = new_tenant()
    answer = server.post(None, tenant=tenant, headers={"Idempotency-Key": merged})
    assert answer.status_code == 400
    assert "joined with a comma" in answer.json()["detail"]
    assert server.admin("GET", "effects", params={"tenant": tenant})["count"] == 0


def test_a_comma_inside_a_quoted_key_is_part_of_the_key(server: Server) -> None:
    tenant = new_tenant()
    answer = server.post(None, tenant=tenant, headers={"Idempotency-Key": '"d2,d3"'})
    assert answer.status_code == 201
    assert len(server.effects("d2,d3", tenant=tenant)) == 1


def _read_answer(sock: socket.socket) -> bytes:
    """One whole response (headers and its Content-Length of body) off a kept-alive socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(65536)
    return head


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_headers_that_never_finish_get_408_and_the_connection_closed(server: Server) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE * 10) as sock:
        started = time.monotonic()
        sock.sendall(b"POST /charges HTTP/1.1\r\nHost: t\r\n")
        time.sleep(DEADLINE / 2)
        sock.sendall(b"X-Slow: 1\r\n")  # a trickle does not reset the deadline
        answer = _read_all(sock)
        took = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"headers did not arrive" in answer
    assert DEADLINE * 0.9 <= took < DEADLINE * 5
    assert server.post(new_key()).status_code == 201  # still serving


def test_a_body_that_never_finishes_gets_408_and_charges_nothing(server: Server) -> None:
    key, tenant = new_key(), new_tenant()
    body = json.dumps(CHARGE).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE * 10) as sock:
        sock.sendall(b"POST /charges HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     b'Idempotency-Key: "' + key.encode() + b'"\r\n'
                     b"Authorization: Bearer " + tenant.encode() + b"\r\n"
                     b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:5])
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b"body did not arrive" in answer
    wait_until(lambda: server.keys()["in_progress"] == 0, "no claimed key")
    assert server.effects(key, tenant=tenant) == []
    assert server.post(key, tenant=tenant).status_code == 201  # the key was never taken


def test_a_kept_alive_connection_idle_between_requests_is_not_cut_short(server: Server) -> None:
    """The deadlines start at a request's first byte: the wait before it is keep-alive's."""
    body = json.dumps(CHARGE).encode()
    request = (b"POST /charges HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
               b"Content-Length: " + str(len(body)).encode() + b"\r\n%s\r\n" + body)
    with socket.create_connection(("127.0.0.1", server.port), timeout=DEADLINE * 10) as sock:
        for number in range(2):
            key = f'Idempotency-Key: "{new_key()}"\r\n'.encode()
            sock.sendall(request.replace(b"%s", key))
            assert _read_answer(sock).startswith(b"HTTP/1.1 201 "), number
            time.sleep(DEADLINE * 1.5 if number == 0 else 0)


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "reference_server"],
    [sys.executable, "-m", "harness.cli", "serve"],
])
@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_clean_shutdown_on_a_signal_exits_0(tmp_path: Path, command: list[str],
                                              sent: signal.Signals) -> None:
    port = free_port()
    process = subprocess.Popen([*command, "--port", str(port), "--store",
                                f"sqlite:///{tmp_path / 'keys.sqlite3'}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_until(listening, "the server to listen", timeout=30, every=0.1)
        process.send_signal(sent)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0, stderr
    assert "Aborted" not in stderr and "Traceback" not in stderr

"""Crashes, handler errors and a slow original: the failures between the server's own steps.

Each crash is a real process exit at a named point (``X-Test-Fault``, exit code 137), then a
restart on the same store; the lease is passed with the test clock, never by waiting.
"""

from __future__ import annotations

import httpx
import pytest

from tests.reference_server.conftest import Servers
from tests.reference_server.support import Server, in_thread, new_key

LEASE = 30.0


@pytest.fixture(scope="module")
def server(servers: Servers, store_kind: str) -> Server:
    return servers.start(["--test-clock", "--test-faults"], store=servers.store(store_kind))


@pytest.fixture(scope="module")
def storing_errors(servers: Servers) -> Server:
    return servers.start(["--errors", "store", "--test-faults"], store=servers.store("sqlite"))


def crash_at(server: Server, key: str, point: str) -> None:
    """POST under ``key`` asking the server to die at ``point``; then start it again."""
    with pytest.raises(httpx.TransportError):
        server.post(key, headers={"X-Test-Fault": point})
    assert server.wait_exit() == 137
    server.start()


def test_after_a_crash_after_the_claim_the_key_recovers_after_the_lease(server: Server) -> None:
    key = new_key()
    crash_at(server, key, "crash-after-claim")
    assert server.keys()["in_progress"] >= 1
    assert server.post(key).status_code == 409  # the dead claim's lease still runs
    assert server.effects(key) == []
    server.advance(LEASE + 1)
    retry = server.post(key)
    assert retry.status_code == 201
    assert "idempotent-replayed" not in retry.headers
    assert server.post(key).headers["idempotent-replayed"] == "true"
    assert server.effects(key) == [retry.json()["id"]]


def test_a_crash_after_the_work_leaves_no_charge_behind(server: Server) -> None:
    key = new_key()
    crash_at(server, key, "crash-after-work")
    assert server.effects(key) == []  # the work and its response commit together or not at all
    server.advance(LEASE + 1)
    retry = server.post(key)
    assert retry.status_code == 201
    assert server.effects(key) == [retry.json()["id"]]


def test_a_crash_before_the_response_replays_the_committed_outcome(server: Server) -> None:
    key = new_key()
    crash_at(server, key, "crash-before-response")
    committed = server.effects(key)
    assert len(committed) == 1
    retry = server.post(key)  # no lease to wait for: the outcome is stored
    assert retry.status_code == 201
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["id"] == committed[0]


def test_a_raising_handler_rolls_back_and_releases_the_key(server: Server) -> None:
    key = new_key()
    failed = server.post(key, headers={"X-Test-Fault": "handler-error"})
    assert failed.status_code == 500
    assert failed.json() == {"error": "internal"}
    assert server.effects(key) == []
    retry = server.post(key)
    assert retry.status_code == 201
    assert "idempotent-replayed" not in retry.headers
    assert server.effects(key) == [retry.json()["id"]]


def test_with_errors_store_the_500_is_the_keys_outcome(storing_errors: Server) -> None:
    key = new_key()
    failed = storing_errors.post(key, headers={"X-Test-Fault": "handler-error"})
    assert failed.status_code == 500
    retry = storing_errors.post(key)
    assert retry.status_code == 500
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.content == failed.content
    assert storing_errors.effects(key) == []


def test_a_zombie_original_cannot_commit_after_a_takeover(server: Server) -> None:
    key = new_key()
    original, late = in_thread(lambda: server.post(key, headers={"X-Test-Delay-Ms": "2500"}))
    server.wait_in_progress()
    server.advance(LEASE + 1)
    takeover = server.post(key)
    assert takeover.status_code == 201
    assert "idempotent-replayed" not in takeover.headers
    original.join(timeout=20)
    zombie = late[0]
    assert zombie.status_code in (201, 409)
    if zombie.status_code == 201:
        assert zombie.headers["idempotent-replayed"] == "true"
        assert zombie.json()["id"] == takeover.json()["id"]
    assert server.effects(key) == [takeover.json()["id"]]
    assert server.post(key).json()["id"] == takeover.json()["id"]

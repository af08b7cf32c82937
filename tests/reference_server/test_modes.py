"""The server's promises that depend on how it was started: lax mode, waiting for an in-flight
key, the cleanup interval, and the admin door's limits."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from reference_server import ServerSettings, create_app
from tests.reference_server.conftest import Servers
from tests.reference_server.support import (
    CHARGE,
    Server,
    in_thread,
    new_key,
    new_tenant,
    wait_until,
)


@pytest.fixture(scope="module")
def lax(servers: Servers, store_kind: str) -> Server:
    return servers.start(["--mode", "lax"], store=servers.store(store_kind))


@pytest.fixture(scope="module")
def waiting(servers: Servers, store_kind: str) -> Server:
    return servers.start(
        ["--in-progress", "wait", "--wait-timeout", "2s", "--max-waiters", "2", "--test-faults"],
        store=servers.store(store_kind),
    )


# -- lax mode -----------------------------------------------------------------------------


def test_lax_mode_runs_a_request_without_a_key_every_time(lax: Server) -> None:
    tenant = new_tenant()
    first = lax.post(None, tenant=tenant)
    second = lax.post(None, tenant=tenant)
    assert first.status_code == second.status_code == 201
    assert "idempotent-replayed" not in second.headers
    assert lax.effects(None, tenant=tenant) == [first.json()["id"], second.json()["id"]]


def test_lax_mode_still_protects_a_request_with_a_key(lax: Server) -> None:
    key = new_key()
    first = lax.post(key)
    assert lax.post(key).headers["idempotent-replayed"] == "true"
    assert lax.post(key, {**CHARGE, "amount": 1}).status_code == 422
    assert lax.effects(key) == [first.json()["id"]]


def test_lax_mode_still_rejects_bad_bodies_and_keys(lax: Server) -> None:
    assert lax.post(None, content=b"{not json").status_code == 400
    assert lax.post(None, headers={"Idempotency-Key": ""}).status_code == 400


def test_without_test_hooks_the_clock_is_404_and_fault_headers_do_nothing(lax: Server) -> None:
    assert lax.request("POST", "/_admin/clock/advance", json={"seconds": 5}).status_code == 404
    assert lax.request("GET", "/_admin/clock").status_code == 404
    key = new_key()
    response = lax.post(key, headers={"X-Test-Fault": "crash-after-claim"})
    assert response.status_code == 201
    assert lax.health()["status"] == "ok"


def test_health_says_how_the_server_runs(lax: Server, store_kind: str) -> None:
    health = lax.health()
    assert health["status"] == "ok"
    assert health["store"] == store_kind
    assert health["mode"] == "lax"
    assert health["flaw"] is None
    assert isinstance(health["pid"], int)


# -- waiting for an in-flight key ---------------------------------------------------------


def test_waiters_get_the_original_outcome_as_a_replay(waiting: Server) -> None:
    key = new_key()
    # long enough that a loaded machine's poll sees the claim, within the 2 s wait
    original, first = in_thread(lambda: waiting.post(key, headers={"X-Test-Delay-Ms": "1500"}))
    waiting.wait_in_progress()
    waiters = [in_thread(lambda: waiting.post(key)) for _ in range(2)]
    for thread, _ in [(original, first), *waiters]:
        thread.join(timeout=15)
    charge_id = first[0].json()["id"]
    for _, results in waiters:
        assert results[0].status_code == 201
        assert results[0].headers["idempotent-replayed"] == "true"
        assert results[0].json()["id"] == charge_id
    assert waiting.effects(key) == [charge_id]


def test_waiting_is_capped_and_bounded_in_time(waiting: Server) -> None:
    key = new_key()
    original, first = in_thread(lambda: waiting.post(key, headers={"X-Test-Delay-Ms": "3500"}))
    waiting.wait_in_progress()
    waiters = [in_thread(lambda: waiting.post(key)) for _ in range(2)]
    wait_until(lambda: waiting.health()["waiters"] == 2, "two waiters")
    refused = waiting.post(key)  # the room is full: an immediate 409
    assert refused.status_code == 409
    assert refused.headers["retry-after"] == "1"
    for thread, _ in waiters:
        thread.join(timeout=15)
    for _, results in waiters:  # the wait timed out (2 s) before the original finished
        assert results[0].status_code == 409
    original.join(timeout=15)
    assert first[0].status_code == 201
    assert waiting.effects(key) == [first[0].json()["id"]]


# -- cleanup on its interval --------------------------------------------------------------


def test_the_cleanup_job_runs_on_its_interval(servers: Servers) -> None:
    server = servers.start(["--retention", "1s", "--cleanup-interval", "100ms"],
                           store=servers.store("sqlite"))
    server.post(new_key())
    assert server.keys()["rows"] == 1
    wait_until(lambda: server.keys()["rows"] == 0, "the cleanup job to delete the key")


# -- the admin door -----------------------------------------------------------------------


def test_the_admin_door_refuses_a_non_loopback_client(tmp_path: Path) -> None:
    app = create_app(ServerSettings(store_url=f"sqlite:///{tmp_path}/admin.sqlite3"))

    async def ask(client_host: str) -> int:
        transport = httpx.ASGITransport(app=app, client=(client_host, 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return (await client.get("/_admin/health")).status_code

    assert asyncio.run(ask("192.0.2.7")) == 403
    assert asyncio.run(ask("127.0.0.1")) == 200


def test_effects_take_the_key_as_the_client_spelled_it(lax: Server) -> None:
    key, tenant = new_key(), new_tenant()
    charge = lax.post(None, tenant=tenant, headers={"Idempotency-Key": key}).json()
    assert lax.effects(key, tenant=tenant) == [charge["id"]]
    assert lax.effects(f'"{key}"', tenant=tenant) == [charge["id"]]
    bad = lax.request("GET", "/_admin/effects", params={"key": ""})
    assert bad.status_code == 400

"""Store outages: a real Toxiproxy proxy between the server and a real PostgreSQL.

The database goes away, stops answering, or drops the connection before the claim, while the
handler runs, and exactly at the commit.  The server must answer 503 (with ``Retry-After``)
quickly, never half-write, and after healing the retries must converge to one charge per key.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from psycopg.conninfo import conninfo_to_dict

from harness.services._postgres import PostgresServer
from harness.services._toxiproxy import Toxic, ToxiproxyProxy, ToxiproxyServer
from tests.reference_server.conftest import Servers
from tests.reference_server.support import Server, in_thread, new_key, wait_until

LEASE = 30.0
QUICKLY = 5.0  # seconds: the store's own deadline is 2 s per operation


@pytest.fixture(scope="module")
def proxy(
    toxiproxy_server: ToxiproxyServer, postgres_server: PostgresServer
) -> Iterator[ToxiproxyProxy]:
    created = toxiproxy_server.client.create_proxy(
        f"pg-{uuid.uuid4().hex[:8]}", f"127.0.0.1:{postgres_server.port}"
    )
    yield created
    created.delete()


@pytest.fixture(scope="module")
def proxied_store(postgres_server: PostgresServer, proxy: ToxiproxyProxy) -> str:
    params = conninfo_to_dict(postgres_server.create_database("reference_outages"))
    return f"postgresql://{params['user']}@{proxy.listen}/{params['dbname']}"


@pytest.fixture(scope="module")
def server(servers: Servers, proxied_store: str) -> Server:
    return servers.start(["--test-clock", "--test-faults"], store=proxied_store)


@pytest.fixture(scope="module")
def plain(servers: Servers, proxied_store: str) -> Server:
    """A second server on the same store whose handler never reads the store (no test clock),
    so a fault added while it runs meets the commit and nothing before it."""
    return servers.start(["--test-faults"], store=proxied_store)


@pytest.fixture(autouse=True)
def healed(proxy: ToxiproxyProxy, server: Server) -> Iterator[None]:
    """Each test starts and ends with the proxy clean and the server reaching its store."""
    yield
    proxy.clear_toxics()
    proxy.enable()
    wait_until(lambda: answers(server), "the server to reach PostgreSQL again", timeout=20)


def answers(server: Server) -> bool:
    return server.request("GET", "/_admin/keys").status_code == 200


def converge(server: Server, key: str) -> httpx.Response:
    """Retry ``key`` until the answer is final (not 503 and not 409), passing leases."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = server.post(key)
        if response.status_code == 409:
            server.advance(LEASE + 1)
        elif response.status_code != 503:
            return response
    raise AssertionError(f"key {key} did not converge")


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503
    assert response.json() == {"error": "store_unavailable"}
    assert response.headers["retry-after"] == "1"


def test_database_down_is_a_quick_503_and_service_resumes(
    server: Server, proxy: ToxiproxyProxy
) -> None:
    key = new_key()
    with proxy.down():
        started = time.monotonic()
        response = server.post(key)
        assert time.monotonic() - started < QUICKLY
        assert_unavailable(response)
        assert server.request("GET", "/_admin/keys").status_code == 503
    wait_until(lambda: answers(server), "the server to reach PostgreSQL again", timeout=20)
    final = converge(server, key)
    assert final.status_code == 201
    assert server.effects(key) == [final.json()["id"]]


def test_a_reset_before_the_claim_stores_nothing(server: Server, proxy: ToxiproxyProxy) -> None:
    key = new_key()
    with proxy.toxic(Toxic("reset_peer", "upstream", {"timeout": 0})):
        assert_unavailable(server.post(key))
    wait_until(lambda: answers(server), "the server to reach PostgreSQL again", timeout=20)
    assert server.effects(key) == []
    final = converge(server, key)
    assert server.effects(key) == [final.json()["id"]]


def test_a_database_that_stops_answering_is_a_503_within_the_deadline(
    server: Server, proxy: ToxiproxyProxy
) -> None:
    key = new_key()
    with proxy.toxic(Toxic("timeout", "downstream", {"timeout": 0})):
        started = time.monotonic()
        response = server.post(key)
        assert time.monotonic() - started < QUICKLY
        assert_unavailable(response)
    wait_until(lambda: answers(server), "the server to reach PostgreSQL again", timeout=20)
    final = converge(server, key)
    assert server.effects(key) == [final.json()["id"]]


def test_a_connection_lost_while_the_handler_runs_writes_nothing(
    server: Server, plain: Server, proxy: ToxiproxyProxy
) -> None:
    key = new_key()
    original, answer = in_thread(lambda: plain.post(key, headers={"X-Test-Delay-Ms": "1500"}))
    server.wait_in_progress()
    with proxy.down():
        original.join(timeout=20)
    assert_unavailable(answer[0])
    wait_until(lambda: answers(server), "the server to reach PostgreSQL again", timeout=20)
    assert server.effects(key) == []  # no charge without its stored response
    final = converge(server, key)  # through the test-clock server, to pass the dead lease
    assert final.status_code == 201
    assert server.effects(key) == [final.json()["id"]]


def test_a_reply_lost_at_the_commit_is_found_by_the_retry(
    server: Server, plain: Server, proxy: ToxiproxyProxy
) -> None:
    key = new_key()
    original, answer = in_thread(lambda: plain.post(key, headers={"X-Test-Delay-Ms": "1500"}))
    server.wait_in_progress()
    # The commit reaches PostgreSQL and commits; its reply never comes back.
    with proxy.toxic(Toxic("timeout", "downstream", {"timeout": 0})):
        original.join(timeout=20)
    assert_unavailable(answer[0])  # the server cannot know whether it committed
    wait_until(lambda: answers(server), "the server to reach PostgreSQL again", timeout=20)
    committed = server.effects(key)
    assert len(committed) == 1
    retry = server.post(key)
    assert retry.status_code == 201
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["id"] == committed[0]


def test_flaw_ack_before_commit_acknowledges_a_charge_that_never_commits(
    servers: Servers, proxied_store: str, proxy: ToxiproxyProxy, server: Server
) -> None:
    flawed = servers.start(["--flaw", "ack-before-commit", "--test-faults"], store=proxied_store)
    key = new_key()
    original, answer = in_thread(lambda: flawed.post(key, headers={"X-Test-Delay-Ms": "1500"}))
    flawed.wait_in_progress()
    with proxy.down():
        original.join(timeout=20)
    acknowledged = answer[0]
    assert acknowledged.status_code == 201  # P2: a 2xx for a charge that does not exist
    wait_until(lambda: answers(flawed), "the flawed server to reach PostgreSQL", timeout=20)
    assert flawed.effects(key) == []
    missing = flawed.request("GET", acknowledged.headers["location"])
    assert missing.status_code == 404

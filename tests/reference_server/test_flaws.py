"""Every named flaw, shown doing its damage directly against a live server.

Each test is the flaw's own "See it" line from its docstring, asserting the defect itself (the
duplicate, the wrong replay, the stuck key), so a flaw that stopped being broken fails here.
The correct server's side of each story is in the protocol, crash and outage suites.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import httpx
import pytest

from reference_server.flaws import FLAWS
from tests.reference_server.conftest import Servers
from tests.reference_server.support import (
    CHARGE,
    Server,
    concurrently,
    first_answers,
    in_thread,
    new_key,
    new_tenant,
)

LEASE = 30.0
RETENTION = 86400.0
StartFlawed = Callable[..., Server]


@pytest.fixture(scope="module")
def flawed(servers: Servers) -> StartFlawed:
    """A server with the named flaw (test clock and faults on), started on first use.

    SQLite unless a test asks for PostgreSQL: the flaws whose store code differs (the racy
    claims, the unfenced and the split commit) run on both.
    """
    started: dict[tuple[str, str], Server] = {}

    def start(flaw: str, store: str = "sqlite") -> Server:
        if (flaw, store) not in started:
            started[flaw, store] = servers.start(
                ["--flaw", flaw, "--test-clock", "--test-faults"], store=servers.store(store))
        return started[flaw, store]

    return start


def crash_at(server: Server, key: str, point: str) -> httpx.Response | None:
    """POST asking for a crash at ``point``; the response if one came out first."""
    try:
        response: httpx.Response | None = server.post(key, headers={"X-Test-Fault": point})
    except httpx.TransportError:
        response = None
    assert server.wait_exit() == 137
    server.start()
    return response


def test_every_flaw_has_a_test_here() -> None:
    missing = [name for name in FLAWS if f"test_{name.replace('-', '_')}" not in globals()]
    assert not missing


def test_server_generated_key(flawed: StartFlawed) -> None:
    server, key = flawed("server-generated-key"), new_key()
    first, retry = server.post(key), server.post(key)
    assert first.status_code == retry.status_code == 201
    assert "idempotent-replayed" not in retry.headers  # P3: never a replay
    assert len(server.effects(key)) == 2  # P1: the retry charged again


def test_no_body_hash(flawed: StartFlawed) -> None:
    server, key = flawed("no-body-hash"), new_key()
    first = server.post(key, {**CHARGE, "amount": 100})
    reused = server.post(key, {**CHARGE, "amount": 999})
    assert reused.status_code == 201  # P4: should be 422
    assert reused.headers["idempotent-replayed"] == "true"
    assert reused.json()["amount"] == 100
    assert reused.json()["id"] == first.json()["id"]


def test_key_only(flawed: StartFlawed) -> None:
    server, key = flawed("key-only"), new_key()
    first = server.post(key)
    retry = server.post(key)
    assert first.status_code == 201
    assert retry.status_code == 200  # P3: not the original status, body or Location
    assert retry.json() == {"status": "already_processed"}
    assert "location" not in retry.headers


def test_short_ttl(flawed: StartFlawed) -> None:
    server, key = flawed("short-ttl"), new_key()
    assert server.health()["retention"] == RETENTION  # what it promises
    first = server.post(key)
    server.advance(301)
    late = server.post(key)
    assert "idempotent-replayed" not in late.headers  # P6: forgotten after 5 minutes
    assert server.effects(key) == [first.json()["id"], late.json()["id"]]  # P1


def test_no_cleanup(flawed: StartFlawed) -> None:
    server = flawed("no-cleanup")
    for _ in range(3):
        server.post(new_key())
    rows = server.keys()["rows"]
    server.advance(RETENTION + 1)
    assert server.cleanup() == 0
    assert server.keys()["rows"] == rows  # P11: expired keys stay forever


#: Bursts a racy flaw gets to lose a race: its window is 50 ms, and on a loaded machine eight
#: threads released together may reach it further apart than that.
RACE_BURSTS = 3


def _raced(server: Server, delay_ms: int) -> tuple[str, list[httpx.Response]]:
    """Eight copies of a fresh key released together, again with another key (at most
    ``RACE_BURSTS`` times) until more than one ran the work: the key and its answers."""
    headers = {"X-Test-Delay-Ms": str(delay_ms)}
    for _ in range(RACE_BURSTS):
        key = new_key()
        responses = concurrently(8, partial(lambda key, _: server.post(key, headers=headers),
                                            key))
        if len(first_answers(responses)) > 1:
            break
    return key, responses


def test_check_then_insert(flawed: StartFlawed, store_kind: str) -> None:
    server = flawed("check-then-insert", store_kind)
    key, responses = _raced(server, 100)
    assert len(first_answers(responses)) > 1
    assert len(server.effects(key)) > 1  # P1: several charges for one key


def test_insert_after_work(flawed: StartFlawed, store_kind: str) -> None:
    server = flawed("insert-after-work", store_kind)
    key, responses = _raced(server, 200)
    assert len(first_answers(responses)) > 1  # P5: retries in flight ran the work again
    assert len(server.effects(key)) > 1  # P1


def test_stuck_after_crash(flawed: StartFlawed) -> None:
    server, key = flawed("stuck-after-crash"), new_key()
    crash_at(server, key, "crash-after-claim")
    server.advance(LEASE + 1)
    assert server.post(key).status_code == 409
    server.advance(3600)
    assert server.post(key).status_code == 409  # P9: stuck for good
    assert server.effects(key) == []


def test_split_commit(flawed: StartFlawed, store_kind: str) -> None:
    server, key = flawed("split-commit", store_kind), new_key()
    crash_at(server, key, "crash-after-work")
    assert len(server.effects(key)) == 1  # a charge whose response was never stored
    server.advance(LEASE + 1)
    retry = server.post(key)
    assert retry.status_code == 201
    assert len(server.effects(key)) == 2  # P9 and P1


def test_no_tenant_scope(flawed: StartFlawed) -> None:
    server, key, alice, bob = flawed("no-tenant-scope"), new_key(), new_tenant(), new_tenant()
    for_alice = server.post(key, tenant=alice)
    for_bob = server.post(key, tenant=bob)
    assert for_bob.headers["idempotent-replayed"] == "true"  # P8: bob sees alice's charge
    assert for_bob.json()["id"] == for_alice.json()["id"]
    assert server.effects(key, tenant=bob) == []


def test_no_fencing(flawed: StartFlawed, store_kind: str) -> None:
    server, key = flawed("no-fencing", store_kind), new_key()
    original, late = in_thread(lambda: server.post(key, headers={"X-Test-Delay-Ms": "2500"}))
    server.wait_in_progress()
    server.advance(LEASE + 1)
    takeover = server.post(key)
    original.join(timeout=20)
    zombie = late[0]
    assert takeover.status_code == zombie.status_code == 201
    assert zombie.json()["id"] != takeover.json()["id"]  # P2: two 2xx, two resources
    assert len(server.effects(key)) == 2  # P1


def test_ack_before_commit(flawed: StartFlawed) -> None:
    server, key = flawed("ack-before-commit"), new_key()
    acknowledged = crash_at(server, key, "crash-after-work")
    assert acknowledged is not None and acknowledged.status_code == 201  # sent, then died
    assert server.request("GET", acknowledged.headers["location"]).status_code == 404
    assert server.effects(key) == []  # P2: a 2xx for a charge that does not exist
    server.advance(LEASE + 1)
    retry = server.post(key)
    assert retry.json()["id"] != acknowledged.json()["id"]

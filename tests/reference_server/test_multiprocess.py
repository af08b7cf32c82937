"""Two server processes on one store: they start together, agree on the clock, and keep P1."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

import pytest

from tests.reference_server.conftest import Servers
from tests.reference_server.support import Server, concurrently, first_answers, new_key


@pytest.fixture(scope="module")
def pair(servers: Servers, store_kind: str) -> tuple[Server, Server]:
    """Both processes started at the same moment on one fresh store (the schema race)."""
    store = servers.store(store_kind)
    with ThreadPoolExecutor(max_workers=2) as pool:
        first, second = pool.map(
            lambda _: servers.start(["--test-clock", "--test-faults"], store=store), range(2)
        )
    return first, second


def test_concurrent_same_key_requests_to_two_processes_make_one_charge(
    pair: tuple[Server, Server],
) -> None:
    key = new_key()
    headers = {"X-Test-Delay-Ms": "300"}
    responses = concurrently(8, lambda i: pair[i % 2].post(key, headers=headers))
    assert {r.status_code for r in responses} <= {201, 409}
    firsts = first_answers(responses)
    assert len(firsts) == 1
    charge_id = firsts[0].json()["id"]
    assert all(r.json()["id"] == charge_id for r in responses if r.status_code == 201)
    assert pair[0].effects(key) == pair[1].effects(key) == [charge_id]


def test_a_key_completed_by_one_process_is_replayed_by_the_other(
    pair: tuple[Server, Server],
) -> None:
    key = new_key()
    first = pair[0].post(key)
    retry = pair[1].post(key)
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.content == first.content


def test_the_test_clock_is_shared_through_the_store(pair: tuple[Server, Server]) -> None:
    def clock(server: Server) -> datetime:
        return datetime.fromisoformat(server.admin("GET", "clock")["now"])

    before = clock(pair[1])
    pair[0].advance(3600)
    assert (clock(pair[1]) - before).total_seconds() >= 3600

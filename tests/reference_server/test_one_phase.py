"""The one-phase path: a request whose work is all in the store is claimed with its work and
response in one transaction, on both stores, and meets every other state of a key as the
two-phase claim does (a finished key, a live claim, an expired lease, a key past retention)."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from reference_server._claims import Claimed, ClaimRequest
from reference_server._clock import ServerClock
from reference_server._ledger import ledger_of
from reference_server._middleware import IdempotencyMiddleware
from reference_server._model import Charge, KeyRecord, StoredResponse
from reference_server._types import Receive, Scope, Send
from reference_server.stores import Commit, Completion, Store
from reference_server.stores._postgres import PostgresStore
from reference_server.stores._sqlite import SqliteStore
from tests.reference_server.conftest import Servers
from tests.reference_server.support import (
    Server,
    concurrently,
    first_answers,
    in_thread,
    new_key,
)

T0 = datetime(2030, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)
RETENTION = timedelta(days=1)
_charge_numbers = itertools.count()
_databases = itertools.count()


@pytest.fixture
def open_store(request: pytest.FixtureRequest, store_kind: str, tmp_path: Path
               ) -> Callable[[], Store]:
    """A fresh store of the module's kind, to open inside the test's own event loop."""
    if store_kind == "sqlite":
        return lambda: SqliteStore(tmp_path / "store.sqlite3")
    dsn = request.getfixturevalue("postgres_server").create_database(
        f"one_phase_{next(_databases)}")
    return lambda: PostgresStore(dsn)


def run_on(make_store: Callable[[], Store],
           test: Callable[[Store], Awaitable[None]]) -> None:
    async def opened() -> None:
        store = make_store()
        await store.open()
        try:
            await test(store)
        finally:
            await store.close()

    asyncio.run(opened())


def claim(key: str, now: datetime = T0, *, lease: timedelta = LEASE) -> ClaimRequest:
    return ClaimRequest(tenant="t", key=key, fingerprint="h", now=now, lease=lease,
                        retention=RETENTION)


def charge(now: datetime = T0) -> Charge:
    return Charge(f"ch_{next(_charge_numbers)}", "t", 1250, "EUR", None, now)


def completion(key: str, now: datetime = T0, *, body: bytes = b'{"n":1}'
               ) -> tuple[Completion, Charge]:
    made = charge(now)
    response = StoredResponse(201, (("content-type", "application/json"),), body)
    return Completion(claim(key, now), response, [made], client_key=key), made


def commit(key: str, token: int, made: Charge, body: bytes) -> Commit:
    response = StoredResponse(201, (("content-type", "application/json"),), body)
    return Commit("t", key, token, response, [made], client_key=key)


# -- the store's step, on both stores -----------------------------------------------------


def test_a_completion_on_a_new_key_writes_the_key_complete_with_its_charges(
    open_store: Callable[[], Store],
) -> None:
    async def test(store: Store) -> None:
        done, made = completion("k")
        assert isinstance(await store.claim_completed(done), Claimed)
        row = await store.lookup("t", "k")
        assert row is not None and row.response == done.response
        assert row.locked_until is None
        assert await store.effects("t", "k") == [made.id]
        assert (await store.key_stats()).in_progress == 0

    run_on(open_store, test)


def test_a_completion_on_a_finished_key_gets_the_row_and_writes_nothing(
    open_store: Callable[[], Store],
) -> None:
    async def test(store: Store) -> None:
        first, made = completion("k", body=b'{"n":1}')
        await store.claim_completed(first)
        second, _ = completion("k", T0 + timedelta(seconds=5), body=b'{"n":2}')
        found = await store.claim_completed(second)
        assert isinstance(found, KeyRecord) and found.response == first.response
        assert await store.effects("t", "k") == [made.id]

    run_on(open_store, test)


def test_a_completion_meets_a_live_claim_and_the_claim_still_commits(
    open_store: Callable[[], Store],
) -> None:
    async def test(store: Store) -> None:
        held = await store.claim(claim("k"))
        assert isinstance(held, Claimed)
        early, _ = completion("k", T0 + timedelta(seconds=1))
        found = await store.claim_completed(early)
        assert isinstance(found, KeyRecord) and found.response is None
        original = charge()
        assert await store.commit(commit("k", held.token, original, b'{"n":0}'))
        assert await store.effects("t", "k") == [original.id]

    run_on(open_store, test)


def test_a_completion_takes_over_an_expired_lease_and_fences_the_original(
    open_store: Callable[[], Store],
) -> None:
    async def test(store: Store) -> None:
        held = await store.claim(claim("k", lease=timedelta(seconds=1)))
        assert isinstance(held, Claimed)
        late, made = completion("k", T0 + timedelta(seconds=2))
        assert isinstance(await store.claim_completed(late), Claimed)
        assert not await store.commit(commit("k", held.token, charge(), b'{"n":0}'))
        row = await store.lookup("t", "k")
        assert row is not None and row.response == late.response
        assert await store.effects("t", "k") == [made.id]

    run_on(open_store, test)


def test_a_completion_replaces_a_key_past_retention(open_store: Callable[[], Store]) -> None:
    async def test(store: Store) -> None:
        old, first = completion("k", body=b'{"n":1}')
        await store.claim_completed(old)
        later = T0 + RETENTION + timedelta(seconds=1)
        new, second = completion("k", later, body=b'{"n":2}')
        assert isinstance(await store.claim_completed(new), Claimed)
        row = await store.lookup("t", "k")
        assert row is not None and row.response == new.response and row.created_at == later
        assert await store.effects("t", "k") == [first.id, second.id]

    run_on(open_store, test)


def test_completions_claims_and_commits_sent_together_each_get_their_own_outcome(
    open_store: Callable[[], Store],
) -> None:
    """On PostgreSQL these share one statement (the writes of one event-loop turn)."""
    async def test(store: Store) -> None:
        held = await store.claim(claim("committing"))
        assert isinstance(held, Claimed)
        finished, _ = completion("finished")
        await store.claim_completed(finished)
        fresh, fresh_charge = completion("fresh")
        again, _ = completion("finished", body=b'{"n":9}')
        work = charge()
        outcomes = await asyncio.gather(
            store.claim_completed(fresh),
            store.claim(claim("claimed")),
            store.commit(commit("committing", held.token, work, b'{"n":0}')),
            store.claim_completed(again),
        )
        assert isinstance(outcomes[0], Claimed)
        assert isinstance(outcomes[1], Claimed)
        assert outcomes[2] is True
        assert isinstance(outcomes[3], KeyRecord) and outcomes[3].response == finished.response
        assert await store.effects("t", "fresh") == [fresh_charge.id]
        assert await store.effects("t", "committing") == [work.id]
        assert await store.effects("t", "claimed") == []
        assert (await store.key_stats()).in_progress == 1  # "claimed", under its lease

    run_on(open_store, test)


# -- the server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(servers: Servers, store_kind: str) -> Server:
    return servers.start([], store=servers.store(store_kind))


def test_fast_requests_with_one_key_sent_at_once_make_one_charge(server: Server) -> None:
    """No delay holds the first one inside its handler: the requests meet in the store, where
    one completion takes the key and every other finds it taken."""
    key = new_key()
    responses = concurrently(8, lambda _: server.post(key))
    assert {r.status_code for r in responses} <= {201, 409}
    firsts = first_answers(responses)
    assert len(firsts) == 1
    winner = firsts[0].json()["id"]
    assert all(r.json()["id"] == winner for r in responses if r.status_code == 201)
    assert server.effects(key) == [winner]


def test_with_a_provider_latency_the_key_is_claimed_before_the_work(
    servers: Servers, store_kind: str,
) -> None:
    """A handler that waits on a provider is work outside the store: the two phases."""
    slow = servers.start(["--work-delay-ms", "1500"], store=servers.store(store_kind))
    key = new_key()
    original, answers = in_thread(lambda: slow.post(key))
    slow.wait_in_progress()
    assert slow.post(key).status_code == 409
    original.join(timeout=15)
    assert answers[0].status_code == 201
    assert slow.effects(key) == [answers[0].json()["id"]]


# -- the handler's runs ------------------------------------------------------------------


class Handler:
    """A charge handler that counts its runs and, once told to, raises as a buggy one would."""

    def __init__(self) -> None:
        self.runs = 0
        self.failing = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.runs += 1
        if self.failing:
            raise RuntimeError("the handler failed")
        ledger = ledger_of(scope)
        assert ledger is not None
        await ledger.record(charge(datetime.now(UTC)))
        await send({"type": "http.response.start", "status": 201,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"ok":true}'})


@asynccontextmanager
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = SqliteStore(tmp_path / "layer.sqlite3")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@asynccontextmanager
async def process(store: Store, handler: Handler) -> AsyncIterator[
        Callable[[str], Awaitable[httpx.Response]]]:
    """A server process of its own (its own layer, so its own memory) on ``store``: a POST."""
    layer = IdempotencyMiddleware(handler, store, clock=ServerClock(store, adjustable=False),
                                  local_work=True)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=layer),
                                 base_url="http://layer") as client:
        yield lambda key: client.post("/charges", content=json.dumps({"amount": 1}),
                                      headers={"Idempotency-Key": key})


def test_a_retry_of_a_key_this_process_finished_replays_without_running_the_handler(
    tmp_path: Path,
) -> None:
    """Another process, which has not seen the key finish, runs its handler first and drops
    the work when the claim finds the key finished."""
    async def test() -> None:
        here, there = Handler(), Handler()
        async with sqlite_store(tmp_path) as store, process(store, here) as post_here, \
                process(store, there) as post_there:
            first = await post_here("k")
            replays = [await post_here("k"), await post_there("k")]
            assert all(r.content == first.content and r.headers["idempotent-replayed"] == "true"
                       for r in replays)
            assert (here.runs, there.runs) == (1, 1)
            assert len(await store.effects("t", "k")) == 1

    asyncio.run(test())


def test_a_handler_failing_before_the_claim_never_hides_a_replay(tmp_path: Path) -> None:
    """The failure is judged under a claim made on its own: a key finished elsewhere replays,
    a new key gets the ``errors`` policy (release: 500, and the key stays free)."""
    async def test() -> None:
        here, failing = Handler(), Handler()
        failing.failing = True
        async with sqlite_store(tmp_path) as store, process(store, here) as post_here, \
                process(store, failing) as post_failing:
            first = await post_here("done")
            replay = await post_failing("done")
            assert replay.status_code == 201 and replay.content == first.content
            assert replay.headers["idempotent-replayed"] == "true"
            assert (await post_failing("new")).status_code == 500
            assert await store.lookup("", "new") is None
            assert len(await store.effects("t", "done")) == 1  # the charge's own tenant
            assert failing.runs == 3  # "new" ran before its claim and again under it

    asyncio.run(test())

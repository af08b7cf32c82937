"""The PostgreSQL store's batches: what one event-loop turn sends as one statement, and the plan
that statement keeps once the key table has grown."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg import sql

from harness.services._postgres import PostgresServer
from reference_server.stores import StoreUnavailable
from reference_server.stores._batching import Batcher
from reference_server.stores._postgres import PostgresStore, _write_statement


class Recorder:
    """A ``run`` for a Batcher that records each batch and answers each item doubled."""

    def __init__(self, *, fail: bool = False, hold: asyncio.Event | None = None) -> None:
        self.batches: list[list[tuple[str, int]]] = []
        self.deadlines: list[float] = []
        self.fail = fail
        self.hold = hold

    async def __call__(self, items: Sequence[tuple[str, int]], deadline: float) -> list[int]:
        self.batches.append(list(items))
        self.deadlines.append(deadline)
        if self.hold is not None:
            await self.hold.wait()
        if self.fail:
            raise StoreUnavailable("PostgreSQL: the connection was reset")
        return [value * 2 for _, value in items]


def key(item: tuple[str, int]) -> str:
    return item[0]


async def sent(run: Recorder, count: int) -> None:
    """Let the event loop turn until ``count`` batches have gone out (a bounded number of turns)."""
    for _ in range(100):
        if len(run.batches) >= count:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{len(run.batches)} batches sent, expected {count}")


def test_one_turn_is_one_batch_and_each_hears_its_own_result() -> None:
    run = Recorder()
    batcher = Batcher(run, timeout=2.0, key=key)

    async def turn() -> list[int]:
        return await asyncio.gather(*(batcher.submit((f"k{n}", n)) for n in range(5)))

    assert asyncio.run(turn()) == [0, 2, 4, 6, 8]
    assert run.batches == [[(f"k{n}", n) for n in range(5)]]


def test_a_key_never_shares_a_batch_and_keeps_its_order() -> None:
    run = Recorder()
    batcher = Batcher(run, timeout=2.0, key=key)

    async def turn() -> tuple[int, ...]:
        return await asyncio.gather(batcher.submit(("a", 1)), batcher.submit(("b", 2)),
                                    batcher.submit(("a", 3)))

    assert list(asyncio.run(turn())) == [2, 4, 6]
    assert run.batches == [[("a", 1), ("b", 2)], [("a", 3)]]


def test_while_a_statement_is_out_the_next_operations_wait_and_go_together() -> None:
    hold = asyncio.Event()
    run = Recorder(hold=hold)
    batcher = Batcher(run, timeout=2.0, key=key)

    async def scenario() -> list[int]:
        first = asyncio.ensure_future(batcher.submit(("a", 1)))
        await sent(run, 1)
        later = [asyncio.ensure_future(batcher.submit((k, 2))) for k in ("b", "c")]
        for _ in range(5):
            await asyncio.sleep(0)
        assert len(run.batches) == 1  # nothing else is sent while the first is out
        hold.set()
        return await asyncio.gather(first, *later)

    assert asyncio.run(scenario()) == [2, 4, 4]
    assert run.batches == [[("a", 1)], [("b", 2), ("c", 2)]]


def test_a_failed_statement_fails_every_operation_in_it() -> None:
    batcher = Batcher(Recorder(fail=True), timeout=2.0, key=key)

    async def turn() -> tuple[object, ...]:
        return await asyncio.gather(batcher.submit(("a", 1)), batcher.submit(("b", 2)),
                                    return_exceptions=True)

    first, second = asyncio.run(turn())
    assert isinstance(first, StoreUnavailable) and isinstance(second, StoreUnavailable)
    assert first is not second  # one exception each: no shared traceback


def test_an_operation_past_its_deadline_in_the_queue_is_never_sent() -> None:
    hold = asyncio.Event()
    run = Recorder(hold=hold)
    batcher = Batcher(run, timeout=0.05, key=key)

    async def scenario() -> tuple[object, ...]:
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(batcher.submit(("a", 1)))
        await sent(run, 1)
        queued = asyncio.ensure_future(batcher.submit(("b", 2)))
        await asyncio.sleep(0.1)  # past both deadlines; the statement out is still held
        assert run.deadlines[0] <= loop.time()
        hold.set()
        return await asyncio.gather(first, queued, return_exceptions=True)

    first, queued = asyncio.run(scenario())
    assert first == 2  # the statement answered; its own deadline is enforced by the store
    assert isinstance(queued, StoreUnavailable)
    assert run.batches == [[("a", 1)]]


def test_the_write_statement_reads_keys_by_index_after_the_table_grows(
    postgres_server: PostgresServer,
) -> None:
    """The batch statement's generic plan is made while the key table is small.  A plain ``=``
    join let PostgreSQL hash-join a full scan of the table into that plan and keep it as the
    table grew (33 ms a statement at 20,000 keys); the plan must probe the primary key."""
    dsn = postgres_server.create_database("batch_plan")
    asyncio.run(_create_schema(PostgresStore(dsn)))
    now = datetime.now(UTC)

    def claims(count: int) -> str:
        return json.dumps([{
            "ord": n, "tenant": "", "key": uuid.uuid4().hex, "hash": "h",
            "now": now.isoformat(), "lease_until": (now + timedelta(seconds=30)).isoformat(),
            "expired_before": (now - timedelta(days=1)).isoformat(), "lease_recovery": True,
        } for n in range(count)])

    statement = _write_statement(claims=True, commits=True, charges=True)
    names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", statement)))
    numbered = re.sub(r"%\((\w+)\)s", lambda m: f"${names.index(m.group(1)) + 1}", statement)
    arguments = {"claims": claims(4), "commits": "[]", "charges": "[]"}
    execute = sql.SQL("EXECUTE writes({})").format(
        sql.SQL(", ").join(sql.Literal(arguments[name]) for name in names))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        conn.execute(sql.SQL("PREPARE writes AS ") + sql.SQL(numbered))
        conn.execute(execute)
        # The table grows far past what the plan was made for.
        conn.execute("INSERT INTO idempotency_keys SELECT '', md5(n::text), 'h', n, 201, "
                     "'{}', NULL, now() FROM generate_series(1, 20000) AS n")
        plan = "\n".join(str(row[0]) for row in conn.execute(sql.SQL("EXPLAIN ") + execute))
    assert "Seq Scan on idempotency_keys" not in plan, plan
    assert "idempotency_keys_pkey" in plan, plan


async def _create_schema(store: PostgresStore) -> None:
    await store.open()
    await store.close()

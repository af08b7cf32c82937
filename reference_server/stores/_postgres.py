"""The PostgreSQL store: the seed's table with a tenant, a lease and a fencing token.

Every statement runs in autocommit mode, so no transaction ever waits on the network between
two statements holding a lock.  The writes of one event-loop turn share one statement
(``_batching``): the claims are one upsert, the commits one update of the keys (each only under
its claim's token), and a CTE inserts the charges of each commit whose update took and of each
completion (a claim written complete at once) whose claim took.  A connection lost during that
statement leaves the outcome unknown to this process, and the next retry finds each key either
complete or still under its claim (or, for a completion, complete or absent).

The connection may run through a Toxiproxy proxy the harness faults, so every operation has a
deadline (``STORE_TIMEOUT``), connects time out, and the server side cancels slow statements;
a failure of any kind becomes ``StoreUnavailable`` (a 503) and sweeps dead connections out of
the pool so the store recovers as soon as the database answers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from reference_server._claims import Claimed, ClaimRequest
from reference_server._model import Charge, KeyRecord, KeyStats, StoredResponse
from reference_server.stores._base import Commit, Completion, StoreKind, StoreUnavailable
from reference_server.stores._batching import Batcher

__all__ = ["STORE_TIMEOUT", "PostgresStore"]

T = TypeVar("T")
Connection = psycopg.AsyncConnection[Any]

# The longest one store operation (waiting for a connection included) may take before the
# request gets a 503.  Short, because a client that meets a database outage should hear so
# quickly and retry, not hold a connection open.
STORE_TIMEOUT = 2.0

_SERVER_OPTIONS = (
    "-c statement_timeout=1500 -c lock_timeout=1000 "
    "-c idle_in_transaction_session_timeout=5000 -c TimeZone=UTC"
)

_SCHEMA = """
CREATE SEQUENCE IF NOT EXISTS idempotency_claim_tokens;
CREATE TABLE IF NOT EXISTS idempotency_keys (
    tenant        text NOT NULL,
    key           text NOT NULL,
    request_hash  text NOT NULL,
    token         bigint NOT NULL,             -- fencing token of the latest claim
    status_code   int NOT NULL DEFAULT 0,      -- 0 while in progress, as in the seed
    response      json,   -- {"headers", "body"}; NULL in progress.  json, not jsonb: kept as
                          -- written, with no conversion either way (never queried inside)
    locked_until  timestamptz,                 -- lease end; NULL once complete
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant, key)
) WITH (fillfactor = 70);  -- room on each page for the commit's update (a HOT update)
CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys (created_at);
CREATE TABLE IF NOT EXISTS charges (
    seq         bigserial PRIMARY KEY,
    id          text NOT NULL UNIQUE,
    tenant      text NOT NULL,
    client_key  text,
    amount      bigint NOT NULL,
    currency    text NOT NULL,
    customer    text,  -- as a JSON string ("..."): PostgreSQL's text cannot hold NUL
    created_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS charges_origin ON charges (tenant, client_key);
CREATE TABLE IF NOT EXISTS server_clock (
    id              int PRIMARY KEY CHECK (id = 1),
    offset_seconds  double precision NOT NULL
);
INSERT INTO server_clock VALUES (1, 0) ON CONFLICT DO NOTHING;
"""

_KEY_COLUMNS = "request_hash, token, status_code, response, locked_until, created_at"

_NEW_ROW = """
    INSERT INTO idempotency_keys AS k
        (tenant, key, request_hash, token, status_code, response, locked_until, created_at)
    VALUES (%(tenant)s, %(key)s, %(hash)s, nextval('idempotency_claim_tokens'), 0, NULL,
            %(lease_until)s, %(now)s)
"""

# Charges as ``_charges_json`` writes them, each with the place of its operation in the batch.
_CHARGES_FROM_JSON = """
    INSERT INTO charges (id, tenant, client_key, amount, currency, customer, created_at)
    SELECT c.id, c.tenant, c.client_key, c.amount, c.currency, c.customer, c.created_at
    FROM json_to_recordset(%(charges)s::json) AS c(
        ord int, id text, tenant text, client_key text, amount bigint, currency text,
        customer text, created_at timestamptz)
"""
# The writes of one batch (``_batching``): claims, completions and fenced commits, one JSON record
# per operation (``ord`` its place in the batch), in one statement, so one transaction.  A batch
# holds a key once, so no two parts of the statement touch the same row.
#
# A claim carries its moment and its lease and retention as seconds; the statement derives the
# lease's end and the retention's horizon from them, as ``ClaimRequest`` does.  A commit carries
# its stored response as a JSON object (``StoredResponse.document``), not as text, which would be
# escaped into a string and parsed back.  A completion (``claim_completed``) is a claim that
# carries its status and response too: its row is written complete, with no lease, and its
# charges are inserted only if its claim took.
#
# A claim claims the key, takes over an expired lease, or replaces a row past retention: the WHERE
# of DO UPDATE is ``judge``'s NEW and TAKE_OVER verdicts (the claim's own retention and lease
# settings looked up in ``claims``).  Where it does not hold, the row comes back for the caller to
# judge.  (That read sees the statement's snapshot, so a row committed by a concurrent claim a
# moment ago can be missing: the caller then retries.)  Rows are inserted in key order, so two
# statements locking the same keys take them in the same order.
_CLAIMS = """
claims AS (
    SELECT ord, tenant, key, hash, now, coalesce(status, 0) AS status, response,
           CASE WHEN status IS NULL THEN now + make_interval(secs => lease) END AS lease_until,
           now - make_interval(secs => retention) AS expired_before, lease_recovery
    FROM json_to_recordset(%(claims)s::json) AS i(
        ord int, tenant text, key text, hash text, now timestamptz, lease float8,
        retention float8, lease_recovery bool, status int, response json)
), claimed AS (
    INSERT INTO idempotency_keys AS k
        (tenant, key, request_hash, token, status_code, response, locked_until, created_at)
    SELECT tenant, key, hash, nextval('idempotency_claim_tokens'), status, response, lease_until,
           now
    FROM claims ORDER BY tenant, key
    ON CONFLICT (tenant, key) DO UPDATE SET
        request_hash = excluded.request_hash,
        token = excluded.token,
        status_code = excluded.status_code,
        response = excluded.response,
        locked_until = excluded.locked_until,
        created_at = CASE WHEN k.created_at <= (SELECT expired_before FROM claims
                                               WHERE tenant = k.tenant AND key = k.key)
                          THEN excluded.created_at ELSE k.created_at END
    WHERE k.created_at <= (SELECT expired_before FROM claims
                           WHERE tenant = k.tenant AND key = k.key)
       OR ((SELECT lease_recovery FROM claims WHERE tenant = k.tenant AND key = k.key)
           AND k.status_code = 0 AND k.locked_until <= excluded.created_at
           AND k.request_hash = excluded.request_hash)
    RETURNING k.tenant, k.key, k.token
)"""
_CLAIM_ROWS = """
SELECT i.ord, c.token, k.request_hash, k.token, k.status_code, k.response, k.locked_until,
       k.created_at
FROM claims AS i
LEFT JOIN claimed AS c ON c.tenant = i.tenant AND c.key = i.key
LEFT JOIN idempotency_keys AS k
    ON c.token IS NULL AND k.tenant = ANY(ARRAY[i.tenant]) AND k.key = ANY(ARRAY[i.key])
"""

# A commit stores the response only under its claim's token.  Rows are updated in key order too.
_COMMITS = """
commits AS (
    SELECT * FROM json_to_recordset(%(commits)s::json) AS i(
        ord int, tenant text, key text, token bigint, status int, response json)
), done AS (
    UPDATE idempotency_keys AS k
    SET status_code = i.status, response = i.response, locked_until = NULL
    FROM (SELECT * FROM commits ORDER BY tenant, key) AS i
    WHERE k.tenant = ANY(ARRAY[i.tenant]) AND k.key = ANY(ARRAY[i.key])
      AND (i.token IS NULL OR k.token = i.token)
    RETURNING i.ord
)"""
_COMMIT_ROWS = "SELECT ord, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM done"

# The operations whose write took, by kind: only their charges are inserted (a claim that took
# carries charges only if it is a completion).
_TOOK = {
    "claims": "SELECT i.ord FROM claims AS i "
              "JOIN claimed AS c ON c.tenant = i.tenant AND c.key = i.key",
    "commits": "SELECT ord FROM done",
}


@functools.cache
def _write_statement(claims: bool, commits: bool, charges: bool) -> str:
    """The statement for a batch with claims (completions among them), commits, and charges, or
    without some of them: a batch gets no part it does not need, which would cost the database
    its setup for nothing.

    Every read of the key table goes through its primary key, one key at a time, written
    ``= ANY(ARRAY[...])`` on purpose: that form can only be a nested loop over the index,
    whereas with a plain ``=`` the prepared statement's generic plan, made while the table is
    small, may hash-join a full scan of it, and keep doing so as the table grows (measured:
    33 ms a statement at 20,000 keys).
    """
    kinds = [kind for kind, present in (("claims", claims), ("commits", commits)) if present]
    parts = [{"claims": _CLAIMS, "commits": _COMMITS}[kind] for kind in kinds]
    if charges:
        took = " UNION ALL ".join(_TOOK[kind] for kind in kinds)
        parts.append(f"added AS ({_CHARGES_FROM_JSON} JOIN ({took}) AS took ON c.ord = took.ord "
                     "RETURNING 1)")
    rows = " UNION ALL ".join({"claims": _CLAIM_ROWS, "commits": _COMMIT_ROWS}[kind]
                              for kind in kinds)
    return f"WITH {', '.join(parts)} {rows}"


_CLAIM_UNCHECKED = f"""
WITH inserted AS ({_NEW_ROW} ON CONFLICT (tenant, key) DO NOTHING RETURNING token)
SELECT token FROM inserted
UNION ALL
SELECT token FROM idempotency_keys
WHERE tenant = %(tenant)s AND key = %(key)s AND NOT EXISTS (SELECT 1 FROM inserted)
"""

_CHARGE_COLUMNS = "id, tenant, amount, currency, customer, created_at"


def _charges_json(batch: Iterable[tuple[int, Sequence[Charge], str | None]]) -> str:
    """The charges of a batch's operations (each its place in the batch, its charges and its
    request's key) as ``json_to_recordset`` reads them: the API's fields, the tenant, the origin
    key and the place."""
    return json.dumps([
        {**c.to_json(), "customer": _stored_customer(c.customer), "tenant": c.tenant,
         "client_key": client_key, "ord": ordinal}
        for ordinal, charges, client_key in batch for c in charges
    ])


def _stored_customer(customer: str | None) -> str | None:
    """The customer as the ``charges`` table keeps it: a JSON string, so that any string a
    client sends (NUL included, which PostgreSQL's text refuses) is stored and read back."""
    return None if customer is None else json.dumps(customer)


def _charge(row: Sequence[Any]) -> Charge:
    charge_id, tenant, amount, currency, customer, created_at = row
    return Charge(charge_id, tenant, amount, currency,
                  None if customer is None else json.loads(customer), created_at)


# What a claim (its claim, or the row it found; None: try again) or a commit (whether it took)
# comes to.
_Outcome = Claimed | KeyRecord | bool | None
# The writes that share a batch.
_Write = ClaimRequest | Completion | Commit


def _key_of(operation: _Write) -> tuple[str, str]:
    return operation.tenant, operation.key


def _claim_record(ordinal: int, claim: ClaimRequest | Completion) -> dict[str, Any]:
    """A claim as ``_CLAIMS`` reads it; a completion's with its status and response."""
    request = claim if isinstance(claim, ClaimRequest) else claim.claim
    record = {
        "ord": ordinal, "tenant": request.tenant, "key": request.key, "hash": request.fingerprint,
        "now": request.now.isoformat(), "lease": request.lease.total_seconds(),
        "retention": request.retention.total_seconds(), "lease_recovery": request.lease_recovery,
    }
    if isinstance(claim, Completion):
        record.update(status=claim.response.status, response=claim.response.document())
    return record


def _describe(dsn: str) -> str:
    """The DSN without its password, for messages."""
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "(an unparsable DSN)"
    params.pop("password", None)
    return " ".join(f"{name}={value}" for name, value in params.items() if value is not None)


def _cut(conn: Connection) -> None:
    """Shut the connection's socket down, so the statement waiting on it fails now.

    A shutdown through a duplicate descriptor, never a close: the descriptor stays psycopg's
    (closing it under psycopg could hand its number to another connection).
    """
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


def _record(row: Sequence[Any]) -> KeyRecord:
    fingerprint, token, status, response, locked_until, created_at = row
    return KeyRecord(
        fingerprint=fingerprint,
        token=int(token),
        response=None if response is None else StoredResponse.from_document(status, response),
        locked_until=locked_until,
        created_at=created_at,
    )


class PostgresStore:
    """A store in the PostgreSQL database at ``dsn`` (its schema created when absent)."""

    def __init__(self, dsn: str, *, max_connections: int = 16) -> None:
        self._dsn = dsn
        self._pool = AsyncConnectionPool(
            dsn,
            min_size=2,
            max_size=max_connections,
            open=False,
            timeout=STORE_TIMEOUT,
            reconnect_timeout=1.0,
            name="reference-server",
            kwargs={
                "autocommit": True,
                "connect_timeout": 2,
                "application_name": "reference-server",
                "options": _SERVER_OPTIONS,
            },
        )
        self._sweep: asyncio.Task[None] | None = None
        # The writes of one event-loop turn, one statement per kind (see ``_batching``).
        self._writes: Batcher[_Write, _Outcome] = Batcher(
            self._write_batch, timeout=STORE_TIMEOUT, key=_key_of)
        self._ledger = Batcher(self._record_batch, timeout=STORE_TIMEOUT)

    @property
    def kind(self) -> StoreKind:
        return "postgresql"

    async def open(self) -> None:
        """Create the schema over one direct connection (failing fast, with the driver's own
        reason, when the database is not there), then fill the pool."""
        where = _describe(self._dsn)
        try:
            async with await psycopg.AsyncConnection.connect(
                self._dsn, connect_timeout=5, autocommit=True
            ) as conn, conn.transaction():
                # Two servers starting at once would race on CREATE ... IF NOT EXISTS.
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext('reference_server schema'))"
                )
                await conn.execute(_SCHEMA)
        except psycopg.OperationalError as exc:
            raise StoreUnavailable(f"PostgreSQL at {where}: {exc}") from exc
        try:
            await self._pool.open(wait=True, timeout=10)
        except PoolTimeout as exc:
            raise StoreUnavailable(f"PostgreSQL at {where}: no pool in 10 s ({exc})") from exc

    async def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        await self._pool.close(timeout=2)

    async def _run(self, operation: Callable[[Connection], Awaitable[T]],
                   deadline: float | None = None) -> T:
        """Run ``operation`` on a pooled connection, answering within ``STORE_TIMEOUT`` (or by
        ``deadline``, on the event loop's clock).

        The deadline is enforced by cutting the connection (a socket shutdown), not by
        cancelling the coroutine: on cancellation psycopg asks the server to cancel the query
        and waits up to ten seconds for it, which a request must not sit through, whereas a
        cut connection fails the statement at once.  Whatever the statement did on the server
        meanwhile, the fencing token and the conditional release keep the key consistent.
        """
        loop = asyncio.get_running_loop()
        if deadline is None:
            deadline = loop.time() + STORE_TIMEOUT
        try:
            async with self._pool.connection(timeout=max(deadline - loop.time(), 0.0)) as conn:
                watchdog = loop.call_at(deadline, _cut, conn)
                try:
                    return await operation(conn)
                finally:
                    watchdog.cancel()
        except (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout) as exc:
            self._sweep_dead_connections()
            late = loop.time() >= deadline
            reason = (f"no answer within {STORE_TIMEOUT} s" if late
                      else f"{type(exc).__name__}: {exc}")
            raise StoreUnavailable(f"PostgreSQL: {reason}") from exc

    def _sweep_dead_connections(self) -> None:
        """Replace the idle connections, in the background: after a reset they are all dead,
        and each would otherwise fail one more request.

        ``drain`` rather than ``check``: checking runs a query on each connection with no
        deadline, which hangs on a network that swallows replies and keeps the connections it
        took out of the pool; draining only closes them and connects anew.
        """
        if self._sweep is None or self._sweep.done():
            self._sweep = asyncio.create_task(self._pool.drain())

    async def _fetchone(self, sql: str, params: Any = None) -> tuple[Any, ...] | None:
        async def fetch(conn: Connection) -> tuple[Any, ...] | None:
            return await (await conn.execute(sql, params)).fetchone()

        return await self._run(fetch)

    async def _fetchall(self, sql: str, params: Any = None, deadline: float | None = None
                        ) -> list[tuple[Any, ...]]:
        async def fetch(conn: Connection) -> list[tuple[Any, ...]]:
            return await (await conn.execute(sql, params)).fetchall()

        return await self._run(fetch, deadline)

    async def _execute(self, sql: str, params: Any = None, deadline: float | None = None
                       ) -> int:
        """Run a statement that returns no rows; the number of rows it changed."""
        async def execute(conn: Connection) -> int:
            return (await conn.execute(sql, params)).rowcount

        return await self._run(execute, deadline)

    # -- claims ---------------------------------------------------------------------------

    def _claim_params(self, request: ClaimRequest) -> dict[str, Any]:
        return {
            "tenant": request.tenant,
            "key": request.key,
            "hash": request.fingerprint,
            "now": request.now,
            "lease_until": request.lease_until,
            "expired_before": request.expired_before,
            "lease_recovery": request.lease_recovery,
        }

    async def claim(self, request: ClaimRequest) -> Claimed | KeyRecord | None:
        outcome = await self._writes.submit(request)
        assert not isinstance(outcome, bool)
        return outcome

    async def lookup(self, tenant: str, key: str) -> KeyRecord | None:
        row = await self._fetchone(
            f"SELECT {_KEY_COLUMNS} FROM idempotency_keys WHERE tenant = %s AND key = %s",
            (tenant, key),
        )
        return None if row is None else _record(row)

    async def claim_unchecked(self, request: ClaimRequest) -> int:
        row = await self._fetchone(_CLAIM_UNCHECKED, self._claim_params(request))
        if row is None:  # inserted by a concurrent statement after this one's snapshot
            row = await self._fetchone(
                "SELECT token FROM idempotency_keys WHERE tenant = %s AND key = %s",
                (request.tenant, request.key),
            )
        if row is None:
            raise StoreUnavailable("the key vanished while it was being claimed")
        return int(row[0])

    async def claim_completed(self, completion: Completion) -> Claimed | KeyRecord | None:
        outcome = await self._writes.submit(completion)
        assert not isinstance(outcome, bool)
        return outcome

    async def commit(self, commit: Commit) -> bool:
        return await self._writes.submit(commit) is True

    async def _write_batch(self, batch: Sequence[_Write], deadline: float) -> list[_Outcome]:
        """One statement for a batch of claims, completions and commits: each one's outcome, in
        order."""
        claims = [(ordinal, w) for ordinal, w in enumerate(batch) if not isinstance(w, Commit)]
        commits = [(ordinal, w) for ordinal, w in enumerate(batch) if isinstance(w, Commit)]
        charges = [(ordinal, w.charges, w.client_key) for ordinal, w in enumerate(batch)
                   if not isinstance(w, ClaimRequest) and w.charges]
        rows = await self._fetchall(
            _write_statement(bool(claims), bool(commits), bool(charges)),
            {
                "claims": json.dumps([_claim_record(ordinal, w) for ordinal, w in claims]),
                "commits": json.dumps([{
                    "ord": ordinal, "tenant": c.tenant, "key": c.key, "token": c.token,
                    "status": c.response.status, "response": c.response.document(),
                } for ordinal, c in commits]),
                "charges": _charges_json(charges),
            },
            deadline,
        )
        outcomes: list[_Outcome] = [False] * len(batch)  # a commit without a row did not take
        for ordinal, claimed, *record in rows:
            if isinstance(batch[ordinal], Commit):
                outcomes[ordinal] = True
            elif claimed is not None:
                outcomes[ordinal] = Claimed(int(claimed))
            else:
                outcomes[ordinal] = None if record[0] is None else _record(record)
        return outcomes

    async def release(self, tenant: str, key: str, token: int) -> None:
        await self._execute(
            "DELETE FROM idempotency_keys "
            "WHERE tenant = %s AND key = %s AND token = %s AND status_code = 0",
            (tenant, key, token),
        )

    # -- the ledger -----------------------------------------------------------------------

    async def record_charges(self, charges: Sequence[Charge], client_key: str | None) -> None:
        await self._ledger.submit((charges, client_key))

    async def _record_batch(self, batch: Sequence[tuple[Sequence[Charge], str | None]],
                            deadline: float) -> list[None]:
        await self._execute(_CHARGES_FROM_JSON, {"charges": _charges_json(
            (ordinal, charges, client_key) for ordinal, (charges, client_key) in enumerate(batch)
        )}, deadline)
        return [None] * len(batch)

    async def get_charge(self, tenant: str, charge_id: str) -> Charge | None:
        row = await self._fetchone(
            f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE id = %s AND tenant = %s",
            (charge_id, tenant),
        )
        return None if row is None else _charge(row)

    async def effects(self, tenant: str, client_key: str | None) -> list[str]:
        match = "client_key IS NULL" if client_key is None else "client_key = %(key)s"
        rows = await self._fetchall(
            f"SELECT id FROM charges WHERE tenant = %(tenant)s AND {match} ORDER BY seq",
            {"tenant": tenant, "key": client_key},
        )
        return [str(row[0]) for row in rows]

    async def effects_total(self) -> int:
        row = await self._fetchone("SELECT count(*) FROM charges")
        assert row is not None
        return int(row[0])

    # -- retention and the test clock -----------------------------------------------------

    async def key_stats(self) -> KeyStats:
        row = await self._fetchone(
            "SELECT count(*), count(*) FILTER (WHERE status_code = 0), min(created_at) "
            "FROM idempotency_keys"
        )
        assert row is not None
        return KeyStats(int(row[0]), int(row[1]), row[2])

    async def delete_expired(self, expired_before: datetime, now: datetime) -> int:
        return await self._execute(
            "DELETE FROM idempotency_keys WHERE created_at <= %s "
            "AND (status_code <> 0 OR locked_until <= %s)",
            (expired_before, now),
        )

    async def clock_offset(self) -> float:
        row = await self._fetchone("SELECT offset_seconds FROM server_clock WHERE id = 1")
        assert row is not None
        return float(row[0])

    async def advance_clock(self, seconds: float) -> float:
        row = await self._fetchone(
            "UPDATE server_clock SET offset_seconds = offset_seconds + %s WHERE id = 1 "
            "RETURNING offset_seconds",
            (seconds,),
        )
        assert row is not None
        return float(row[0])

"""The embedded default store: one SQLite file, correct within and across processes.

WAL lets readers in other processes proceed during a write; ``BEGIN IMMEDIATE`` takes the write
lock at the start of every writing transaction, so a claim's read and write are one atomic step;
``busy_timeout`` makes another process's writer wait instead of failing.  No transaction spans
the handler's work: the claim commits before the handler runs, and the response and charges
commit after it returns (or, for a request whose work was done first, ``claim_completed``
writes the claim, the response and the charges together).

Statements run on the event loop's own thread.  Each transaction takes well under a
millisecond, and handing it to a worker thread cost more than running it (two thread wake-ups
and a GIL hand-over per call, measured at three times the transaction itself); running inline
also means no two transactions of this process can ever interleave.  Writes go through
``GroupCommit``, which commits the writes of one event-loop turn together.  The price of
running inline is that a lock held by another process stalls this one for up to
``busy_timeout``, which is kept as short as the PostgreSQL store's deadline: past it the
request gets a 503.

``synchronous=NORMAL`` keeps every commit across a process crash (what the harness inflicts);
only a power loss could take back the newest commits.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from reference_server._claims import Claimed, ClaimRequest, Verdict, judge
from reference_server._model import Charge, KeyRecord, KeyStats, StoredResponse
from reference_server.stores._base import Commit, Completion, StoreKind, StoreUnavailable
from reference_server.stores._group_commit import GroupCommit

__all__ = ["SqliteStore"]

T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS idempotency_keys (
    tenant        TEXT NOT NULL,
    key           TEXT NOT NULL,
    request_hash  TEXT NOT NULL,
    token         INTEGER NOT NULL,            -- fencing token of the latest claim
    status_code   INTEGER NOT NULL DEFAULT 0,  -- 0 while in progress, as in the seed
    response      TEXT,                        -- StoredResponse document; NULL while in progress
    locked_until  REAL,                        -- lease end (unix seconds); NULL once complete
    created_at    REAL NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys (created_at);
CREATE TABLE IF NOT EXISTS charges (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    tenant      TEXT NOT NULL,
    client_key  TEXT,
    amount      INTEGER NOT NULL,
    currency    TEXT NOT NULL,
    customer    TEXT,
    created_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS charges_origin ON charges (tenant, client_key);
CREATE TABLE IF NOT EXISTS server_clock (
    id              INTEGER PRIMARY KEY CHECK (id = 1),
    offset_seconds  REAL NOT NULL
);
INSERT OR IGNORE INTO server_clock VALUES (1, 0);
"""

_KEY_COLUMNS = "request_hash, token, status_code, response, locked_until, created_at"
_INSERT_CLAIM = (
    "INSERT OR IGNORE INTO idempotency_keys (tenant, key, request_hash, token, status_code, "
    "response, locked_until, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_CHARGE_COLUMNS = "id, tenant, amount, currency, customer, created_at"


def _ts(moment: datetime) -> float:
    return moment.timestamp()


def _dt(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _next_token(record: KeyRecord | None) -> int:
    """A fencing token greater than any earlier claim of the key.

    The clock in nanoseconds, bumped past the row's last token: claims of one key are
    serialised by the write lock, so the tokens of a key only grow, and a key deleted by
    cleanup is claimed again a whole retention later, with a far larger token than any
    zombie still holding the old one.  (A counter row would cost every claim one more page
    written to the WAL.)
    """
    return max(time.time_ns(), 0 if record is None else record.token + 1)


def _record(row: tuple[str, int, int, str | None, float | None, float]) -> KeyRecord:
    fingerprint, token, status, response, locked_until, created_at = row
    return KeyRecord(
        fingerprint=fingerprint,
        token=token,
        response=None if response is None else StoredResponse.from_document(status, response),
        locked_until=None if locked_until is None else _dt(locked_until),
        created_at=_dt(created_at),
    )


def _charge(row: tuple[str, str, int, str, str | None, float]) -> Charge:
    charge_id, tenant, amount, currency, customer, created_at = row
    return Charge(charge_id, tenant, amount, currency, customer, _dt(created_at))


class SqliteStore:
    """A store in the SQLite file at ``path`` (created with its schema when absent)."""

    def __init__(self, path: Path, *, busy_timeout: float = 2.0) -> None:
        self.path = path
        self._busy_timeout = busy_timeout
        self._conn: sqlite3.Connection | None = None
        self._writes = GroupCommit(self._connection, name=str(path))

    @property
    def kind(self) -> StoreKind:
        return "sqlite"

    async def open(self) -> None:
        await self._read(self._connect)

    async def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise RuntimeError("the store is not open")
        return self._conn

    async def _read(self, function: Callable[..., T], *args: object) -> T:
        """Run a function that needs no transaction of its own, translating database errors."""
        try:
            return function(*args)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite {self.path}: {exc}") from exc

    def _connect(self) -> None:
        conn = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        # Keys arrive in random order, so claims and replays touch random B-tree leaves: keep
        # them in memory (a 64 MiB cache, reads through a 256 MiB map) rather than re-reading
        # each one with a system call.
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA mmap_size = 268435456")
        try:  # one transaction under the write lock: processes starting together take turns
            conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} COMMIT;")
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            conn.close()
            raise
        self._conn = conn

    # -- claims ---------------------------------------------------------------------------

    async def claim(self, request: ClaimRequest) -> Claimed | KeyRecord | None:
        return await self._writes.run(lambda db: self._claim(db, request, None))

    async def claim_completed(self, completion: Completion) -> Claimed | KeyRecord | None:
        def claim_and_commit(db: sqlite3.Connection) -> Claimed | KeyRecord:
            outcome = self._claim(db, completion.claim, completion.response)
            if isinstance(outcome, Claimed):
                self._insert_charges(db, completion.charges, completion.client_key)
            return outcome

        return await self._writes.run(claim_and_commit)

    def _claim(self, db: sqlite3.Connection, request: ClaimRequest,
               complete: StoredResponse | None) -> Claimed | KeyRecord:
        """Claim the key if ``judge`` allows it, leaving the row in progress under a lease, or
        with ``complete`` already stored as its response; else the row."""
        if complete is None:
            status, response, locked_until = 0, None, _ts(request.lease_until)
        else:
            status, response, locked_until = complete.status, complete.to_document(), None
        fresh = _next_token(None)
        if db.execute(_INSERT_CLAIM, (request.tenant, request.key, request.fingerprint, fresh,
                                      status, response, locked_until, _ts(request.now))
                      ).rowcount == 1:
            return Claimed(fresh)  # the common case: a key never seen
        record = self._lookup(db, request.tenant, request.key)
        verdict = judge(record, request)
        if verdict is Verdict.NEW:  # the row is past retention: replace it
            token = _next_token(record)
            db.execute(
                "UPDATE idempotency_keys SET request_hash = ?, token = ?, status_code = ?, "
                "response = ?, locked_until = ?, created_at = ? WHERE tenant = ? AND key = ?",
                (request.fingerprint, token, status, response, locked_until, _ts(request.now),
                 request.tenant, request.key),
            )
            return Claimed(token)
        if verdict is Verdict.TAKE_OVER:
            token = _next_token(record)
            db.execute(
                "UPDATE idempotency_keys SET token = ?, status_code = ?, response = ?, "
                "locked_until = ? WHERE tenant = ? AND key = ?",
                (token, status, response, locked_until, request.tenant, request.key),
            )
            return Claimed(token)
        assert record is not None
        return record

    @staticmethod
    def _lookup(db: sqlite3.Connection, tenant: str, key: str) -> KeyRecord | None:
        row = db.execute(
            f"SELECT {_KEY_COLUMNS} FROM idempotency_keys WHERE tenant = ? AND key = ?",
            (tenant, key),
        ).fetchone()
        return None if row is None else _record(row)

    async def lookup(self, tenant: str, key: str) -> KeyRecord | None:
        return await self._read(self._lookup, self._connection(), tenant, key)

    async def claim_unchecked(self, request: ClaimRequest) -> int:
        def claim(db: sqlite3.Connection) -> int:
            db.execute(_INSERT_CLAIM, (request.tenant, request.key, request.fingerprint,
                                       _next_token(None), 0, None, _ts(request.lease_until),
                                       _ts(request.now)))
            row = db.execute(
                "SELECT token FROM idempotency_keys WHERE tenant = ? AND key = ?",
                (request.tenant, request.key),
            ).fetchone()
            return int(row[0])

        return await self._writes.run(claim)

    async def commit(self, commit: Commit) -> bool:
        fence = "" if commit.token is None else " AND token = ?"
        params: tuple[object, ...] = (
            commit.response.status, commit.response.to_document(), commit.tenant, commit.key,
        )
        if commit.token is not None:
            params += (commit.token,)

        def store(db: sqlite3.Connection) -> bool:
            updated = db.execute(
                "UPDATE idempotency_keys SET status_code = ?, response = ?, locked_until = NULL "
                f"WHERE tenant = ? AND key = ?{fence}",
                params,
            ).rowcount
            if updated != 1:
                return False
            self._insert_charges(db, commit.charges, commit.client_key)
            return True

        return await self._writes.run(store)

    async def release(self, tenant: str, key: str, token: int) -> None:
        await self._writes.run(lambda db: db.execute(
            "DELETE FROM idempotency_keys "
            "WHERE tenant = ? AND key = ? AND token = ? AND status_code = 0",
            (tenant, key, token),
        ))

    # -- the ledger -----------------------------------------------------------------------

    async def record_charges(self, charges: Sequence[Charge], client_key: str | None) -> None:
        await self._writes.run(lambda db: self._insert_charges(db, charges, client_key))

    @staticmethod
    def _insert_charges(
        db: sqlite3.Connection, charges: Sequence[Charge], client_key: str | None
    ) -> None:
        db.executemany(
            "INSERT INTO charges (id, tenant, client_key, amount, currency, customer, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(c.id, c.tenant, client_key, c.amount, c.currency, c.customer, _ts(c.created_at))
             for c in charges],
        )

    async def get_charge(self, tenant: str, charge_id: str) -> Charge | None:
        row = await self._read(self._fetchone,
                               f"SELECT {_CHARGE_COLUMNS} FROM charges WHERE id = ? AND tenant = ?",
                               (charge_id, tenant))
        return None if row is None else _charge(row)

    async def effects(self, tenant: str, client_key: str | None) -> list[str]:
        rows = await self._read(self._fetchall,
                                "SELECT id FROM charges WHERE tenant = ? AND client_key IS ? "
                                "ORDER BY seq",
                                (tenant, client_key))
        return [str(row[0]) for row in rows]

    async def effects_total(self) -> int:
        row = await self._read(self._fetchone, "SELECT count(*) FROM charges", ())
        return int(row[0])

    def _fetchone(self, sql: str, params: tuple[object, ...]) -> Any:
        return self._connection().execute(sql, params).fetchone()

    def _fetchall(self, sql: str, params: tuple[object, ...]) -> list[Any]:
        return self._connection().execute(sql, params).fetchall()

    # -- retention and the test clock -----------------------------------------------------

    async def key_stats(self) -> KeyStats:
        rows, in_progress, oldest = await self._read(
            self._fetchone,
            "SELECT count(*), coalesce(sum(status_code = 0), 0), min(created_at) "
            "FROM idempotency_keys",
            (),
        )
        return KeyStats(int(rows), int(in_progress), None if oldest is None else _dt(oldest))

    async def delete_expired(self, expired_before: datetime, now: datetime) -> int:
        return await self._writes.run(lambda db: db.execute(
            "DELETE FROM idempotency_keys WHERE created_at <= ? "
            "AND (status_code <> 0 OR locked_until <= ?)",
            (_ts(expired_before), _ts(now)),
        ).rowcount)

    async def clock_offset(self) -> float:
        row = await self._read(self._fetchone,
                               "SELECT offset_seconds FROM server_clock WHERE id = 1", ())
        return float(row[0])

    async def advance_clock(self, seconds: float) -> float:
        return await self._writes.run(lambda db: float(db.execute(
            "UPDATE server_clock SET offset_seconds = offset_seconds + ? WHERE id = 1 "
            "RETURNING offset_seconds",
            (seconds,),
        ).fetchone()[0]))

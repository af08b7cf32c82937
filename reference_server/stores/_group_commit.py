"""Group commit for SQLite: the write operations of two event-loop turns share one transaction.

SQLite's cost per write transaction is mostly fixed (locks, the WAL frames of every page it
touches, the shared-memory index), and a request with an idempotency key needs two of them (the
claim, then the commit) where a bare request needs one.  Queuing the writes that arrive in two
turns of the event loop and committing them together pays that fixed cost once per batch
instead of once per operation.  An operation that raises undoes only itself: the batch is then
run again with each operation in a savepoint of its own (savepoints for every batch cost two
statements per operation, for an error that almost never comes).  Nobody hears back before the
shared COMMIT, so nothing is acknowledged before it is durable.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from typing import Any, TypeVar

from reference_server.stores._base import StoreUnavailable

__all__ = ["GroupCommit"]

T = TypeVar("T")
Operation = Callable[[sqlite3.Connection], Any]
Pending = tuple[Operation, "asyncio.Future[Any]"]


class GroupCommit:
    def __init__(self, connection: Callable[[], sqlite3.Connection], *, name: str) -> None:
        self._connection = connection
        self._name = name
        self._pending: list[Pending] = []

    async def run(self, operation: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``operation`` in the next shared write transaction; its result once committed."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._pending.append((operation, future))
        if len(self._pending) == 1:
            # A turn later than the first write could: the writes that requests reach in the
            # next turn join this transaction instead of paying for one of their own (a tenth
            # more first requests per second at 8 connections), and an idle server waits one
            # more pass of the event loop, microseconds.
            loop.call_soon(loop.call_soon, self._flush)
        return await future

    def _flush(self) -> None:
        batch, self._pending = self._pending, []
        try:
            outcomes = self._commit(batch)
        except Exception as exc:  # a loop callback must settle every future, whatever happens
            failure: Exception = exc
            if isinstance(exc, sqlite3.OperationalError):
                failure = StoreUnavailable(f"SQLite {self._name}: {exc}")
            outcomes = [(False, failure)] * len(batch)
        for (_, future), (succeeded, value) in zip(batch, outcomes, strict=True):
            if future.cancelled():
                continue
            if succeeded:
                future.set_result(value)
            else:
                future.set_exception(value)

    def _commit(self, batch: list[Pending]) -> list[tuple[bool, Any]]:
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            try:  # the common case: no operation raises, and none needs a savepoint
                outcomes = [(True, operation(db)) for operation, _ in batch]
            except sqlite3.OperationalError:
                raise
            except Exception:
                # One of them raised: undo them all and run them again, each in a
                # savepoint, so that only the one that raises is undone.  An operation is
                # a function of the database alone, so running it again is safe.
                db.rollback()
                db.execute("BEGIN IMMEDIATE")
                outcomes = [self._apply(db, operation) for operation, _ in batch]
            db.commit()
        except BaseException:
            if db.in_transaction:
                db.rollback()
            raise
        return outcomes

    @staticmethod
    def _apply(db: sqlite3.Connection, operation: Operation) -> tuple[bool, Any]:
        """Run one operation in a savepoint; an error undoes it alone (unless the database
        itself failed, which fails the whole batch)."""
        db.execute("SAVEPOINT operation")
        try:
            result = operation(db)
        except sqlite3.OperationalError:
            raise
        except Exception as exc:
            db.execute("ROLLBACK TO operation")
            db.execute("RELEASE operation")
            return False, exc
        db.execute("RELEASE operation")
        return True, result

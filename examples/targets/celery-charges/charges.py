"""A Celery app with one task, ``charges.charge``, that writes a charge to a SQLite ledger: the
side effect the harness counts (``[effects]`` in ../celery-charges*.toml).

The task is declared with ``acks_late=True``, the setting Celery's documentation recommends for
idempotent tasks: the message is acked after the task returns, so a worker that dies while
running it gets it redelivered.  That is at-least-once delivery, and the task must be idempotent
for it to be safe.  ``CHARGES_MODE`` selects how the task is written:

- ``no-dedup``: as most users write it: validate, insert the charge, return.  A redelivery
  (a worker killed after the insert and before the ack, a lost ack) charges again.
- ``dedup``: the task claims its idempotency key in a ``processed_keys`` table in the same
  transaction as the charge (``BEGIN IMMEDIATE``, a primary key on the key), so a second run of
  the same key finds it taken and charges nothing, and a run that dies before the commit leaves
  neither the claim nor the charge.

The producer passes the key as the task's ``key`` argument (``charge.delay(key=..., amount=...)``;
the harness publishes the same message, Celery's task protocol 2, from the target file).

Environment: ``CELERY_BROKER_URL`` (the harness's ``{amqp_url}``), ``CHARGES_QUEUE``,
``CHARGES_LEDGER`` (the SQLite file) and ``CHARGES_MODE``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from celery import Celery
from celery.signals import worker_init

MODES = ("no-dedup", "dedup")
MODE = os.environ.get("CHARGES_MODE", "no-dedup")
if MODE not in MODES:
    raise SystemExit(f"error: CHARGES_MODE={MODE!r} is not a mode; use one of {', '.join(MODES)}")
LEDGER = Path(os.environ.get("CHARGES_LEDGER", "ledger.sqlite3"))
QUEUE = os.environ.get("CHARGES_QUEUE", "charges")

app = Celery("charges", broker=os.environ.get("CELERY_BROKER_URL", "amqp://127.0.0.1:5672//"))
app.conf.update(
    task_default_queue=QUEUE,
    task_serializer="json",
    accept_content=["json"],
    worker_prefetch_multiplier=1,          # hold one message at a time beyond the running one
    worker_enable_remote_control=False,    # no pidbox queue per worker: one queue, one consumer
    worker_send_task_events=False,
    broker_connection_retry_on_startup=True,
    # Heartbeats every 2 s: a stalled connection is noticed within seconds, and a worker told to
    # stop (SIGTERM: warm shutdown) wakes its event loop at the next heartbeat check and exits
    # within a second; with Celery's default (120 s) it sleeps about ten seconds first.
    broker_heartbeat=2,
)

SCHEMA = """
create table if not exists charges (
    id integer primary key autoincrement,
    idempotency_key text not null,
    amount integer not null,
    currency text not null,
    task_id text not null
);
create table if not exists processed_keys (
    idempotency_key text primary key,
    charge_id integer not null
);
"""


def connect() -> sqlite3.Connection:
    """Autocommit mode, so ``BEGIN IMMEDIATE`` below is the whole transaction; WAL so that the
    harness's counting reads never wait for a worker's write."""
    conn = sqlite3.connect(LEDGER, timeout=30, isolation_level=None)
    conn.execute("pragma journal_mode = wal")
    return conn


@worker_init.connect
def create_ledger(**_: object) -> None:
    """The tables exist before the worker takes its first message (and the harness counts)."""
    conn = connect()
    try:
        conn.executescript(SCHEMA)
    finally:
        conn.close()


def checked(amount: object, currency: object) -> tuple[int, str]:
    """A charge Celery would run but the business refuses: the task fails, Celery acks it (its
    ``task_acks_on_failure_or_timeout`` default), nothing is charged."""
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 1:
        raise ValueError(f"amount must be a positive integer, not {amount!r}")
    if not isinstance(currency, str) or len(currency) != 3:
        raise ValueError(f"currency must be three letters, not {currency!r}")
    return amount, currency


@app.task(name="charges.charge", bind=True, acks_late=True)
def charge(self: object, key: str, amount: object, currency: object = "usd") -> int | None:
    """Charge ``amount`` once per ``key`` (in ``dedup`` mode); the charge's id, or None when
    the key was done already."""
    amount, currency = checked(amount, currency)
    task_id = self.request.id  # type: ignore[attr-defined]
    conn = connect()
    try:
        conn.execute("begin immediate")
        if MODE == "dedup":
            try:
                conn.execute("insert into processed_keys (idempotency_key, charge_id) "
                             "values (?, 0)", (key,))
            except sqlite3.IntegrityError:
                conn.execute("rollback")
                return None  # done before (a redelivery or a republish): ack, charge nothing
        charge_id = conn.execute(
            "insert into charges (idempotency_key, amount, currency, task_id) values (?, ?, ?, ?)",
            (key, amount, currency, task_id)).lastrowid
        if MODE == "dedup":
            conn.execute("update processed_keys set charge_id = ? where idempotency_key = ?",
                         (charge_id, key))
        conn.execute("commit")
        return charge_id
    except BaseException:
        if conn.in_transaction:
            conn.execute("rollback")
        raise
    finally:
        conn.close()

"""The throwaway PostgreSQL is real: the seed's table and its atomic claim behave as the article
says they do."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from harness.services._postgres import PostgresServer, start_postgres

SEED_SCHEMA = """
create table idempotency_keys (
  key           text primary key,
  request_hash  text not null,
  status_code   int not null,
  response_body jsonb not null,
  created_at    timestamptz not null default now()
);
create index idempotency_keys_created on idempotency_keys(created_at);
"""

CLAIM = (
    "insert into idempotency_keys(key, request_hash, status_code, response_body) "
    "values (%s, %s, 0, %s::jsonb) on conflict (key) do nothing returning key"
)


def test_seed_schema_and_atomic_claim(postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database("seed_claim")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SEED_SCHEMA)
        first = conn.execute(CLAIM, ("k1", "h", "{}")).fetchall()
        second = conn.execute(CLAIM, ("k1", "h", "{}")).fetchall()
    assert first == [("k1",)]
    assert second == []


def test_claim_is_atomic_between_two_connections(postgres_server: PostgresServer) -> None:
    dsn = postgres_server.create_database("seed_claim_two")
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute(SEED_SCHEMA)
    with psycopg.connect(dsn) as a, psycopg.connect(dsn) as b:
        won_a = a.execute(CLAIM, ("k", "h", "{}")).fetchall()
        b.execute("set statement_timeout = 200")
        try:
            b.execute(CLAIM, ("k", "h", "{}"))  # blocks on a's uncommitted row
            blocked = False
        except psycopg.errors.QueryCanceled:
            blocked = True
        b.rollback()
        a.commit()
        won_b = b.execute(CLAIM, ("k", "h", "{}")).fetchall()
    assert won_a == [("k",)]
    assert blocked
    assert won_b == []


def test_databases_on_a_server_someone_else_runs_are_dropped_by_whoever_made_them(
        postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs sharing one IDEM_PG_DSN get databases of their own, and each run's close drops
    its own, never the other's: nothing is left behind on the user's server."""
    monkeypatch.setenv("IDEM_PG_DSN", postgres_server.dsn)
    first, second = start_postgres(), start_postgres()
    try:
        mine = [first.create_database("idem_run"), first.create_database("idem_run")]
        theirs = second.create_database("idem_run")
        assert len({*mine, theirs}) == 3
        first.close()
        assert _databases(postgres_server) & {_name(d) for d in mine} == set()
        with psycopg.connect(theirs) as conn:  # the other run's database is untouched
            assert conn.execute("select 1").fetchone() == (1,)
    finally:
        first.close()
        second.close()
    assert _name(theirs) not in _databases(postgres_server)


def _name(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["dbname"])


def _databases(server: PostgresServer) -> set[str]:
    with psycopg.connect(server.dsn) as conn:
        return {row[0] for row in conn.execute("select datname from pg_database")}

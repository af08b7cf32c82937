"""The throwaway PostgreSQL is real: the seed's table and its atomic claim behave as the article
says they do."""

from __future__ import annotations

import psycopg

from harness._postgres import PostgresServer

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

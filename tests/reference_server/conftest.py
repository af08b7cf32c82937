"""Fixtures for the reference server suite: stores, and servers shared per module.

A module asks ``servers.start(options, store=...)`` once per configuration and shares that
process between its tests, each test using fresh keys and tenants; a process is restarted only
when a test crashed it on purpose.  PostgreSQL is requested only by tests that use it, so the
SQLite half of the suite runs on a machine without it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from harness.services._postgres import PostgresServer
from tests.reference_server.support import Server

_databases = itertools.count()


class Servers:
    """Creates stores and server processes for one module, and stops them all at its end."""

    def __init__(self, request: pytest.FixtureRequest, directory: Path) -> None:
        self._request = request
        self.directory = directory
        self._started: list[Server] = []

    def store(self, kind: str) -> str:
        """A fresh, empty store of ``kind`` (``sqlite`` or ``postgresql``)."""
        number = next(_databases)
        if kind == "sqlite":
            return f"sqlite:///{self.directory / f'store-{number}.sqlite3'}"
        postgres: PostgresServer = self._request.getfixturevalue("postgres_server")
        params = conninfo_to_dict(postgres.create_database(f"reference_{number}"))
        return (f"postgresql://{params['user']}@{params['host']}:{params['port']}"
                f"/{params['dbname']}")

    def start(self, options: Sequence[str] = (), *, store: str) -> Server:
        server = Server(options, store=store, log_dir=self.directory).start()
        self._started.append(server)
        return server

    def close(self) -> None:
        for server in self._started:
            server.stop()


@pytest.fixture(scope="module")
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Servers]:
    factory = Servers(request, tmp_path_factory.mktemp("reference-server"))
    yield factory
    factory.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind

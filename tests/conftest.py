"""Session services for the whole suite: one Toxiproxy, one PostgreSQL and one RabbitMQ, really
started.

Outside CI a missing service skips the tests that need it, saying why; under ``CI=true`` it
fails them, because a gate that silently skips its fault injection proves nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness._errors import ServiceUnavailable
from harness.services._postgres import PostgresServer, start_postgres
from harness.services._processes import stop_children_on_sigterm
from harness.services._rabbitmq import RabbitServer, start_rabbitmq
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy
from tests.missing import missing


def pytest_configure(config: pytest.Config) -> None:
    stop_children_on_sigterm()  # a CI timeout's SIGTERM must not orphan Toxiproxy or PostgreSQL


@pytest.fixture(scope="session")
def toxiproxy_server() -> Iterator[ToxiproxyServer]:
    try:
        server = start_toxiproxy()
    except ServiceUnavailable as exc:
        missing(str(exc))
    with server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        server = start_postgres()
    except ServiceUnavailable as exc:
        missing(str(exc))
    with server:
        yield server


@pytest.fixture(scope="session")
def rabbitmq_server() -> Iterator[RabbitServer]:
    try:
        server = start_rabbitmq()
    except ServiceUnavailable as exc:
        missing(str(exc))
    with server:
        yield server

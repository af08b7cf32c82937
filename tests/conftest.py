"""Session services for the whole suite: one Toxiproxy, one PostgreSQL, one RabbitMQ and one Kafka
broker, really started.

Outside CI a missing service skips the tests that need it, saying why; under ``CI=true`` it
fails them, because a gate that silently skips its fault injection proves nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness._errors import ServiceUnavailable
from harness._interrupts import Interrupted, interruption_handled, raise_if_interrupted
from harness.services._kafka import KafkaServer, start_kafka
from harness.services._postgres import PostgresServer, start_postgres
from harness.services._processes import stop_children_on_sigterm
from harness.services._rabbitmq import RabbitServer, start_rabbitmq
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy
from tests.missing import missing


def pytest_configure(config: pytest.Config) -> None:
    stop_children_on_sigterm()  # a CI timeout's SIGTERM must not orphan Toxiproxy or PostgreSQL


@pytest.fixture(autouse=True)
def no_signal_left_pending() -> Iterator[None]:
    """A signal a test sent and caught the ``Interrupted`` of, without the handling a command
    does (``interruption_handled``), stays pending for the process: the next exploration on
    that worker stopped before its first example, and its test failed far from the cause."""
    yield
    try:
        raise_if_interrupted()
    except Interrupted as pending:
        interruption_handled()
        pytest.fail(f"the test left {pending.signal_name} pending: the code it drives must "
                    f"call interruption_handled() once it has obeyed the signal, as a command "
                    f"does")


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


@pytest.fixture(scope="session")
def kafka_server(toxiproxy_server: ToxiproxyServer) -> Iterator[KafkaServer]:
    """A throwaway broker whose proxied links have their Toxiproxy proxies (8 links: one per
    consumer process a test runs at once); tests use topics and groups of their own."""
    try:
        server = start_kafka(toxiproxy=toxiproxy_server.client)
    except ServiceUnavailable as exc:
        missing(str(exc))
    with server:
        yield server

"""Fixtures for the reference consumer suite: one correct consumer shared by the session, and
fresh stores and consumer processes per test for the rest.

The broker is the session's one ``rabbitmq_server``; each test uses queues and keys of its own
(``support.unique``), so tests share the broker without seeing each other's messages.  The shared
correct consumer serves every test that needs no options of its own (tests use fresh keys on its
queue, and only move its clock forward, which never touches a key still in progress).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness.services._postgres import PostgresServer
from harness.services._rabbitmq import RabbitServer
from tests.reference_consumer.support import ConsumerProcess, unique

_databases = itertools.count()


class Consumers:
    """Starts consumer processes for one test and stops them all at its end."""

    def __init__(self, request: pytest.FixtureRequest, broker: RabbitServer,
                 directory: Path) -> None:
        self._request = request
        self.broker = broker
        self.directory = directory
        self._started: list[ConsumerProcess] = []

    def sqlite(self) -> str:
        return f"sqlite:///{self.directory / f'store-{next(_databases)}.sqlite3'}"

    def postgresql(self) -> str:
        postgres: PostgresServer = self._request.getfixturevalue("postgres_server")
        return postgres.create_database(f"consumer_{next(_databases)}")

    def start(self, queue: str, options: Sequence[str] = (), *, store: str,
              amqp_url: str | None = None) -> ConsumerProcess:
        consumer = ConsumerProcess(amqp_url or self.broker.url, queue, store=store,
                                   log_dir=self.directory, options=options)
        self._started.append(consumer)
        return consumer.start()

    def close(self) -> None:
        for consumer in self._started:
            consumer.stop()


@pytest.fixture
def consumers(request: pytest.FixtureRequest, rabbitmq_server: RabbitServer,
              tmp_path: Path) -> Iterator[Consumers]:
    factory = Consumers(request, rabbitmq_server, tmp_path)
    yield factory
    factory.close()


@pytest.fixture
def queue() -> str:
    return unique("charges")


#: The shared correct consumer's options: everything a test may ask of it.
SHARED_OPTIONS = ("--test-faults", "--test-clock", "--max-attempts", "3", "--prefetch", "4")


@pytest.fixture(scope="session")
def correct(rabbitmq_server: RabbitServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConsumerProcess]:
    directory = tmp_path_factory.mktemp("correct-consumer")
    consumer = ConsumerProcess(rabbitmq_server.url, unique("shared"),
                               store=f"sqlite:///{directory / 'store.sqlite3'}",
                               log_dir=directory, options=SHARED_OPTIONS)
    consumer.start()
    yield consumer
    consumer.stop()

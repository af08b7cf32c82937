"""Fixtures for the Kafka tests: the session's broker (``kafka_server``, tests/conftest.py) and
reference Kafka consumer processes per test, each reaching the broker through a proxied link of
its own, as the harness will run them."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness.services._kafka import KafkaLink, KafkaServer
from tests.kafka.reference import KafkaConsumerProcess
from tests.kafka.support import unique

_stores = itertools.count()


class KafkaConsumers:
    """Starts reference Kafka consumers for one test, each on a link, and stops them all."""

    def __init__(self, server: KafkaServer, directory: Path) -> None:
        self.server = server
        self.directory = directory
        self._started: list[tuple[KafkaConsumerProcess, KafkaLink]] = []

    def sqlite(self) -> str:
        return f"sqlite:///{self.directory / f'store-{next(_stores)}.sqlite3'}"

    def topic(self, partitions: int = 1) -> str:
        name = unique("charges")
        self.server.admin().create_topic(name, partitions=partitions)
        return name

    def start(self, topic: str, group: str, options: Sequence[str] = (), *,
              store: str) -> KafkaConsumerProcess:
        link = self.server.take_link()
        consumer = KafkaConsumerProcess(link.bootstrap, topic, group, store=store,
                                        log_dir=self.directory, options=options)
        self._started.append((consumer, link))
        try:
            return consumer.start()
        except BaseException:
            self.close()
            raise

    def link_of(self, consumer: KafkaConsumerProcess) -> KafkaLink:
        return next(link for started, link in self._started if started is consumer)

    def close(self) -> None:
        for consumer, link in self._started:
            consumer.kill()
            self.server.release_link(link)
        self._started.clear()


@pytest.fixture
def kafka_consumers(kafka_server: KafkaServer, tmp_path: Path) -> Iterator[KafkaConsumers]:
    factory = KafkaConsumers(kafka_server, tmp_path)
    yield factory
    factory.close()

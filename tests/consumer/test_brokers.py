"""Where a consumer run's broker comes from (harness/consumer/_brokers.py): a broker given to
the runs of a block serves them all; a ``shared_broker`` block starts each kind of broker the
first time a run inside it needs one, keeps it for the next runs and stops it at its end; outside
any block, each run starts and stops its own.  The starters are counted, not run: what is
checked is who starts and stops a broker, and when (the brokers themselves are tests/kafka's and
tests/reference_consumer's)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from harness.consumer import _brokers, reference_consumer_target
from harness.consumer._brokers import broker_for, shared_broker, sharing
from harness.services._kafka import KafkaServer
from harness.services._rabbitmq import RabbitServer


class Starts:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[str] = []

    def kafka(self, **_: Any) -> Any:
        @contextmanager
        def one() -> Iterator[KafkaServer]:
            self.started.append("kafka")
            try:
                yield KafkaServer("127.0.0.1:1", origin="counted")
            finally:
                self.stopped.append("kafka")
        return one()

    def rabbitmq(self) -> Any:
        @contextmanager
        def one() -> Iterator[Any]:
            self.started.append("rabbitmq")
            try:
                yield type("Node", (), {"url": "amqp://guest:guest@127.0.0.1:1/"})()
            finally:
                self.stopped.append("rabbitmq")
        return one()


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> Starts:
    counted = Starts()
    monkeypatch.setattr(_brokers, "start_kafka", counted.kafka)
    monkeypatch.setattr(_brokers, "start_rabbitmq", counted.rabbitmq)
    return counted


KAFKA = reference_consumer_target(store=None, flaw=None, broker="kafka")
RABBITMQ = reference_consumer_target(store=None, flaw=None)


def test_outside_a_block_each_run_starts_and_stops_its_own(starts: Starts) -> None:
    for _ in range(2):
        with broker_for(KAFKA) as service:
            assert isinstance(service, KafkaServer)
    assert starts.started == starts.stopped == ["kafka", "kafka"]


def test_a_shared_block_starts_each_kind_once_when_first_needed(starts: Starts) -> None:
    with shared_broker():
        assert starts.started == []  # nothing yet: no run has asked
        for _ in range(2):
            with broker_for(KAFKA) as kafka, broker_for(RABBITMQ) as rabbit:
                assert isinstance(kafka, KafkaServer) and rabbit.startswith("amqp://")
        assert sorted(starts.started) == ["kafka", "rabbitmq"] and starts.stopped == []
    assert sorted(starts.stopped) == ["kafka", "rabbitmq"]


def test_a_broker_given_to_a_block_serves_a_shared_block_inside_it(starts: Starts) -> None:
    given = KafkaServer("127.0.0.1:2", origin="a test session's")
    with sharing(given), shared_broker(), broker_for(KAFKA) as service:
        assert service is given
    assert starts.started == []


def test_a_rabbitmq_given_serves_rabbitmq_runs_only(starts: Starts) -> None:
    node = RabbitServer.__new__(RabbitServer)
    node.url = "amqp://guest:guest@127.0.0.1:3/"  # type: ignore[misc]
    with sharing(node):
        with broker_for(RABBITMQ) as rabbit:
            assert rabbit == node.url
        with broker_for(KAFKA):
            pass
    assert starts.started == ["kafka"]

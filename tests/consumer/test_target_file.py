"""Consumer target files: what they may say, and the clear error for what they may not."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness._errors import TargetFileError
from harness.consumer import ConsumerScenario, ConsumerTarget, reference_consumer_target
from harness.consumer._reference import BROKERS
from harness.targets._loader import parse_target, target_model
from scenarios import CATALOG

BASE: dict[str, Any] = {
    "name": "worker", "kind": "consumer",
    "start": {"command": ["worker", "--broker", "{amqp_url}"]},
    "effects": {"kind": "sql", "dsn": "sqlite:///ledger.db",
                "query": "select count(*) from charges where key = %(key)s"},
}


def parse(**changes: Any) -> ConsumerTarget:
    target = parse_target({**BASE, **changes}, source="worker.toml")
    assert isinstance(target, ConsumerTarget)
    return target


def problems(**changes: Any) -> str:
    with pytest.raises(TargetFileError) as raised:
        parse_target({**BASE, **changes}, source="worker.toml")
    return str(raised.value)


def test_a_queue_table_alone_makes_a_consumer_target() -> None:
    data = {k: v for k, v in BASE.items() if k != "kind"}
    target = parse_target({**data, "queue": {"name": "charges"}}, source="w.toml")
    assert isinstance(target, ConsumerTarget) and target.queue.name == "charges"


def test_defaults_read_as_a_broker_the_harness_starts_and_a_header_key() -> None:
    target = parse()
    assert target.broker.url is None and target.start.ready == "queue"
    assert target.message.dedup == "header" and target.message.dedup_header == "Idempotency-Key"
    assert "republish" in target.capabilities() and "poison" not in target.capabilities()


@pytest.mark.parametrize(("changes", "expected"), [
    ({"endpoint": {"path": "/charges"}}, "[endpoint] describes an HTTP service"),
    ({"url": "http://127.0.0.1:8000"}, "give a [start] table"),
    ({"mesage": {}}, "did you mean `message`?"),
    ({"kind": "consumr"}, 'write kind = "consumer"'),
    ({"start": {"command": ["worker"]}}, "must use {amqp_url}"),
    ({"start": {"command": ["w", "{amqp_url}"], "ready": "http"}}, "needs {port}"),
    ({"broker": {"url": "http://127.0.0.1:5672"}}, "must start with amqp://"),
    ({"message": {"dedup": "body"}}, "needs {key} in the body"),
    ({"promises": {"dedup_windw": "1h"}}, "did you mean `dedup_window`?"),
    ({"hooks": {"slow": {"header": "X-Slow", "value": "1"}}}, "HTTP request hooks"),
    ({"message": {"body": {"queue": "{queu}"}}}, "uses {queu}, which the harness does not"),
    ({"message": {"headers": {"x": "{tenant}"}}}, "[message] may use {key}, {amount}"),
    ({"message": {"properties": {"priority_": 1}}}, "not AMQP properties"),
    ({"hooks": {"pause": {"points": {"before-work": "{ms}"}}}}, "give header ="),
    ({"message": {"body": [[], {"amount": "{amount}"}], "dedup": "message-id"},
      "hooks": {"pause": {"field": "2.pause", "points": {"before-work": "{ms}"}}}},
     "the field must name a place in [message] body"),
    ({"promises": {"on_failure": "republish"}}, "needs retry_delay"),
    ({"hooks": {"work_failures": [{"name": "a", "header": "X", "value": "1"},
                                  {"name": "a", "header": "X", "value": "2"}]}},
     "names must be distinct"),
    ({"promises": {"dedup_windw": "1h"}}, "docs/consumers.md lists every field"),
])
def test_mistakes_are_named_with_their_fix(changes: dict[str, Any], expected: str) -> None:
    assert expected in problems(**changes)


def test_a_saved_definition_loads_again_as_the_same_target() -> None:
    target = reference_consumer_target(store=None, flaw="no-dedup")
    definition = target.model_dump(mode="json", exclude={"source"})
    again = target_model(definition).model_validate({**definition, "source": target.source})
    assert again == target


def test_each_kind_of_scenario_is_not_applicable_to_the_other_kind_of_target() -> None:
    """A consumer scenario is n/a against an HTTP service, and plays against the reference
    consumer on at least one broker (a Kafka group's rebalance has no RabbitMQ twin)."""
    consumers = [reference_consumer_target(store=None, flaw=None, broker=broker)
                 for broker in BROKERS]
    http = parse_target({"name": "svc", "url": "http://127.0.0.1:8000",
                         "effects": {"kind": "recorder", "port": 9}}, source="s.toml")
    for scenario in CATALOG.values():
        if isinstance(scenario, ConsumerScenario):
            assert "queue-consumer scenario" in (scenario.not_applicable(http) or "")
            assert any(scenario.not_applicable(c) is None for c in consumers), scenario.name
    assert "lacks a poison message" in (CATALOG["poison-message"].not_applicable(parse()) or "")


def test_placeholders_reach_every_part_of_the_message() -> None:
    from harness.consumer._messages import compose

    target = parse(message={
        "body": [[], {"key": "{key}", "queue": "{queue}", "amount": "{amount}"}, {}],
        "headers": {"task": "charge", "origin": "{run}"},
        "properties": {"correlation_id": "{message_id}", "type": "charge"},
        "dedup": "body"},
        hooks={"pause": {"field": "1.test_pause", "points": {"before-work": "before-work:{ms}"}}})
    from harness.consumer._messages import Hook

    assert target.hooks.pause is not None
    values = {"key": "k1", "amount": 5, "nonce": "n", "message_id": "m1", "queue": "q-1",
              "run": "r1", "dead_letter_queue": ""}
    parts = compose(target, values, poison=False,
                    hooks=(Hook(target.hooks.pause, "before-work:500"),))
    assert json.loads(parts.body) == [[], {"key": "k1", "queue": "q-1", "amount": 5,
                                           "test_pause": "before-work:500"}, {}]
    assert parts.headers == {"task": "charge", "origin": "r1"}
    assert parts.properties == {"correlation_id": "m1", "type": "charge"}


def test_copies_are_the_same_json_in_other_bytes() -> None:
    from harness.consumer._messages import ENCODINGS, compose

    target = parse()
    values = {"key": "k1", "amount": 5, "nonce": "n", "message_id": "m1", "queue": "q",
              "run": "r", "dead_letter_queue": ""}
    bodies = [compose(target, values, poison=False, encoding=n).body
              for n in range(len(ENCODINGS))]
    assert len(set(bodies)) == len(ENCODINGS)
    assert all(json.loads(b) == json.loads(bodies[0]) for b in bodies)

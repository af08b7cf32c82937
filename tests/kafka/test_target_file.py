"""Kafka consumer target files: what they may say, and the clear error, naming the fix, for what
belongs to RabbitMQ (and the reverse).  No broker needed: the file is read, never run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness._errors import TargetFileError
from harness.consumer import ConsumerScenario, ConsumerTarget, reference_consumer_target
from harness.consumer._broker_kinds import without_the_other_broker
from harness.targets._loader import load_target, parse_target, target_model
from scenarios import CATALOG, default_scenarios, named_for

KAFKA: dict[str, Any] = {
    "name": "charges-worker", "kind": "consumer",
    "start": {"command": ["worker", "--bootstrap", "{kafka_bootstrap}", "--topic", "{topic}",
                          "--group", "{group}", "--port", "{port}"], "ready": "http"},
    "broker": {"kind": "kafka"},
    "topic": {"name": "charges-{run}", "partitions": 2},
    "message": {"key": "{key}", "dedup": "key"},
    "effects": {"kind": "sql", "dsn": "sqlite:///ledger.db",
                "query": "select count(*) from charges where key = %(key)s"},
}
CORPUS_TARGETS = Path(__file__).parents[1] / "kafka_corpus" / "targets"


def parse(**changes: Any) -> ConsumerTarget:
    target = parse_target({**KAFKA, **changes}, source="worker.toml")
    assert isinstance(target, ConsumerTarget)
    return target


def problems(**changes: Any) -> str:
    with pytest.raises(TargetFileError) as raised:
        parse_target({**KAFKA, **changes}, source="worker.toml")
    return str(raised.value)


def test_a_kafka_file_reads_as_a_consumer_of_a_topic() -> None:
    target = parse()
    assert target.kafka and target.topic.partitions == 2 and target.message.dedup == "key"
    assert {"offsets", "partitions"} <= target.capabilities()
    assert "ack-hold" not in target.capabilities()
    assert "poll-interval" not in target.capabilities()  # no max_poll_interval declared


def test_a_topic_table_alone_says_kafka_and_ready_defaults_to_the_group() -> None:
    data = {k: v for k, v in KAFKA.items() if k not in ("kind", "broker")}
    data["start"] = {"command": ["worker", "{kafka_bootstrap}", "{topic}"]}
    target = parse_target(data, source="w.toml")
    assert isinstance(target, ConsumerTarget) and target.kafka
    assert target.start.ready == "group"


def test_the_session_timeout_is_the_heartbeat_the_harness_waits_on() -> None:
    target = parse(broker={"kind": "kafka", "session_timeout": "3s",
                           "max_poll_interval": "5s"})
    assert target.broker.heartbeat == pytest.approx(1.0)
    assert "poll-interval" in target.capabilities()


@pytest.mark.parametrize(("changes", "expected"), [
    ({"queue": {"name": "charges"}}, "[queue] is RabbitMQ's: on Kafka write [topic]"),
    ({"broker": {"kind": "kafka", "url": "amqp://127.0.0.1"}}, "not a url: write bootstrap"),
    ({"broker": {"kind": "kafka", "bootstrap": "localhost"}}, "is not HOST:PORT"),
    ({"broker": {"kind": "kafka", "session_timeout": "5s", "max_poll_interval": "2s"}},
     "max_poll_interval must be at least session_timeout"),
    ({"start": {"command": ["w", "{amqp_url}", "{queue}"]}},
     "{amqp_url} (write {kafka_bootstrap})"),
    ({"start": {"command": ["w", "{kafka_bootstrap}", "{session_timeout_ms}"]}},
     "give [broker] session_timeout"),
    ({"start": {"command": ["w", "{kafka_bootstrap}"], "ready": "queue"}},
     "on Kafka write ready = \"group\""),
    ({"message": {"dedup": "message-id"}}, "a Kafka record has no message id to deduplicate"),
    ({"message": {"properties": {"type": "charge"}}}, "properties are AMQP's"),
    ({"message": {"dedup": "key"}}, "write key = \"{key}\" in [message]"),
    ({"promises": {"ack": "before-work"}}, "on Kafka write commit ="),
    ({"promises": {"dead_letter_queue": "dead"}}, "on Kafka write dead_letter_topic"),
    ({"promises": {"on_failure": "requeue"}}, "on Kafka write \"retry\""),
    ({"promises": {"commit": "sometimes"}}, "'after-work', 'before-work' or 'auto'"),
    ({"hooks": {"pause": {"header": "X-Pause", "points": {"before-ack": "{ms}"}}}},
     "write before-commit"),
    ({"hooks": {"pause": {"header": "X-Pause", "points": {"before-work": "{ms}"}}}},
     "deliveries = \"every-process\""),
    ({"topic": {"partitions": 0}}, "greater than or equal to 1"),
])
def test_what_belongs_to_rabbitmq_is_refused_with_the_fix(changes: dict[str, Any],
                                                          expected: str) -> None:
    assert expected in problems(**changes)


@pytest.mark.parametrize(("changes", "expected"), [
    ({"topic": {"name": "charges"}, "broker": {"kind": "rabbitmq"}}, "[topic] is Kafka's"),
    ({"message": {"key": "{key}"}}, "[message] key is a Kafka record's key"),
    ({"promises": {"commit": "auto"}}, "commit is Kafka's: on RabbitMQ write ack"),
    ({"start": {"command": ["w", "{kafka_bootstrap}"]}}, "those are Kafka's"),
])
def test_what_belongs_to_kafka_is_refused_on_rabbitmq(changes: dict[str, Any],
                                                      expected: str) -> None:
    rabbit = {**KAFKA, "broker": {}, "message": {},
              "start": {"command": ["worker", "{amqp_url}"]}}
    rabbit.pop("topic")
    with pytest.raises(TargetFileError) as raised:
        parse_target({**rabbit, **changes}, source="w.toml")
    assert expected in str(raised.value)


def test_a_saved_kafka_target_loads_again_and_a_rabbitmq_one_keeps_its_shape() -> None:
    kafka = reference_consumer_target(store=None, flaw="dedup-in-memory", broker="kafka")
    definition = kafka.model_dump(mode="json", exclude={"source"})
    assert "queue" not in definition and definition["topic"]["partitions"] == 2
    again = target_model(definition).model_validate({**definition, "source": kafka.source})
    assert again == kafka
    rabbit = reference_consumer_target(store=None, flaw=None)
    dumped = rabbit.model_dump(mode="json", exclude={"source"})
    assert "topic" not in dumped and "kind" not in dumped["broker"]
    assert "commit" not in dumped["promises"] and "key" not in dumped["message"]
    assert without_the_other_broker({"topic": {}, "queue": {}}, "kafka") == {"topic": {}}


def test_each_broker_gets_the_catalog_its_broker_can_play() -> None:
    kafka = reference_consumer_target(store=None, flaw=None, broker="kafka")
    rabbit = reference_consumer_target(store=None, flaw=None)
    on_kafka = {s.name for s in default_scenarios(kafka)}
    on_rabbit = {s.name for s in default_scenarios(rabbit)}
    kafka_only = {"rebalance-while-working", "cold-reassignment", "offset-reset"}
    assert kafka_only <= on_kafka and not kafka_only & on_rabbit
    assert on_rabbit < on_kafka | on_rabbit and on_rabbit <= on_kafka
    for scenario in default_scenarios(kafka):
        assert isinstance(scenario, ConsumerScenario)
        assert scenario.not_applicable(kafka) is None, scenario.name
    with pytest.raises(Exception, match="not a scenario for"):
        named_for(rabbit, ["offset-reset"])
    assert all(isinstance(s, ConsumerScenario) for s in CATALOG.values()
               if s.name in kafka_only)


@pytest.mark.parametrize("path", sorted(CORPUS_TARGETS.glob("*.toml")), ids=lambda p: p.stem)
def test_every_corpus_target_reads_as_a_kafka_consumer(path: Path) -> None:
    target = load_target(path)
    assert isinstance(target, ConsumerTarget) and target.kafka
    assert target.message.key == "{key}" and target.promises.dead_letters

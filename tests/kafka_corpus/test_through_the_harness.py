"""The Kafka corpus through the harness (issue 40, item 6): each consumer written by others, on
the session's real broker through Toxiproxy links, judged by the same catalog and explorer as
the reference consumer.  Each correct mode is clean: the whole Kafka catalog finds nothing,
nothing lost or doubled in the queue account; each named flaw is caught, by ``run`` (the
scenario ``flaws.toml`` names) and by ``explore`` (first failure only, a small budget), as a
property it breaks.

One test class per consumer, so that ``pytest -n N --dist loadscope`` (which groups a class's
tests) plays the four side by side, each class's plays on one worker with the worker's own
broker.  Inside a class the plays go two at a time: most of a consumer run is waiting (pauses,
sessions, quiet intervals).  A finding on a correct consumer is a bug in the consumer or a check
that assumes the reference consumer's shape; neither is hidden: the message lists every finding.
Each correct mode at five seeds, explored too, and each flaw at two seeds with the full budget
are bench/kafka.py's.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.consumer._brokers import sharing
from harness.services._kafka import KafkaServer
from harness.services._toxiproxy import ToxiproxyServer
from tests.kafka_corpus.play import play, target_named
from tests.kafka_corpus.support import FLAWS, Flaw, installed
from tests.missing import missing

pytestmark = pytest.mark.timeout(600)

SEED = 7
#: The budget within which an exploration must find a flaw (the opening finds each here).
FLAW_EXAMPLES = 20
#: Plays of one consumer at once.
AT_ONCE = 2
#: A play: (flaw or None, "run" or "explore").
Job = tuple[str | None, str]


def _findings(results: dict[str, Any]) -> list[str]:
    return [f"{s['name']}: {f['property']} {f['message']}"
            for s in results["scenarios"] for f in s["findings"]]


class ThroughTheHarness:
    """The tests every corpus consumer gets; a subclass names its consumer."""

    consumer: str

    @pytest.fixture(scope="class")
    @classmethod
    def plays(cls, kafka_server: KafkaServer, toxiproxy_server: ToxiproxyServer,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Job, dict[str, Any]]]:
        """Every play of the consumer: its correct mode over the Kafka catalog, and each of
        its flaws over the scenario that shows it and explored (first failure only)."""
        consumer = cls.consumer
        if not installed(consumer):
            missing(f"the Kafka corpus consumer {consumer} is not installed: run `make "
                    "kafka-corpus` (tests/kafka_corpus/install-all)", kind="corpus consumer")
        jobs: list[tuple[Job, dict[str, Any]]] = [((None, "run"), {})]
        for flaw in cls.flaws():
            jobs.append(((flaw.name, "explore"), {"explore_examples": FLAW_EXAMPLES,
                                                  "first_only": True}))
            jobs.append(((flaw.name, "run"), {"scenarios": [flaw.scenario]}))

        def one(job: tuple[Job, dict[str, Any]]) -> tuple[Job, dict[str, Any]]:
            (flaw, how), options = job
            report: Path = tmp_path_factory.mktemp(f"{consumer}-{flaw or 'correct'}-{how}")
            return job[0], play(target_named(consumer, flaw), report, seed=SEED,
                                toxiproxy=toxiproxy_server, **options)

        with sharing(kafka_server), ThreadPoolExecutor(AT_ONCE) as pool:
            yield dict(pool.map(one, jobs))

    @classmethod
    def flaws(cls) -> list[Flaw]:
        flaws = [f for f in FLAWS if f.consumer == cls.consumer]
        assert len(flaws) >= 2, cls.consumer
        return flaws

    def test_the_correct_consumer_has_no_finding(self,
                                                 plays: dict[Job, dict[str, Any]]) -> None:
        results = plays[(None, "run")]
        assert results["complete"]
        findings = _findings(results)
        assert not findings, (f"false findings on the correct consumer {self.consumer}:\n"
                              + "\n".join(findings))
        judged = [s for s in results["scenarios"] if s["verdict"] != "n/a"]
        assert len(judged) >= 9, [(s["name"], s["reason"]) for s in results["scenarios"]]
        # a moment a scenario could not play on a client someone else wrote (aiokafka may keep
        # a paused member's partition with it through a rebalance: no zombie formed) leaves it
        # undecided, saying so; never a pass, never a finding, and at most one
        undecided = {s["name"]: s.get("unknown_reasons") for s in judged
                     if s["verdict"] != "pass"}
        assert len(undecided) <= 1 and all(
            "not shown" in str(reasons) for reasons in undecided.values()), undecided
        outcomes = results["queue_account"]["outcomes"]
        assert outcomes["lost"] == 0 and outcomes["duplicated"] == 0, outcomes

    def test_each_flaw_is_caught_by_run(self, plays: dict[Job, dict[str, Any]]) -> None:
        missed = []
        for flaw in self.flaws():
            (scenario,) = plays[(flaw.name, "run")]["scenarios"]
            named = {f["property"] for f in scenario["findings"]}
            if scenario["verdict"] != "fail" or not named & set(flaw.properties):
                missed.append(f"--flaw {flaw.name}: {flaw.scenario} gave {scenario['verdict']} "
                              f"({scenario.get('reason') or scenario.get('unknown_reasons')}) "
                              f"with findings {sorted(named) or 'none'}; expected one of "
                              f"{', '.join(flaw.properties)}")
        assert not missed, "\n".join(missed)

    def test_each_flaw_is_caught_by_explore(self, plays: dict[Job, dict[str, Any]]) -> None:
        missed = []
        for flaw in self.flaws():
            results = plays[(flaw.name, "explore")]
            named = {f["property"] for s in results["scenarios"] for f in s["findings"]}
            if results["verdict"] != "fail" or not named & set(flaw.properties):
                numbers = results["extra"]["explore"]
                missed.append(f"--flaw {flaw.name}: explore gave {results['verdict']} after "
                              f"{numbers['examples']} examples with findings "
                              f"{sorted(named) or 'none'}; expected one of "
                              f"{', '.join(flaw.properties)}")
        assert not missed, "\n".join(missed)


class TestConfluentInbox(ThroughTheHarness):
    consumer = "confluent_inbox"


class TestAiokafkaRedis(ThroughTheHarness):
    consumer = "aiokafka_redis"


class TestKafkajsRedis(ThroughTheHarness):
    consumer = "kafkajs_redis"


class TestFranzInbox(ThroughTheHarness):
    consumer = "franz_inbox"

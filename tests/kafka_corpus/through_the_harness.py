"""The Kafka corpus through the harness (issue 40, item 6): each consumer written by others, on
the session's real broker through Toxiproxy links, judged by the same catalog and explorer as
the reference consumer.  Each correct mode is clean: the whole Kafka catalog finds nothing
(nothing lost or doubled in the queue account) and a seeded exploration finds nothing; each
named flaw is caught, by ``run`` (the scenario ``flaws.toml`` names) and by ``explore``, as a
property it breaks.

One module per consumer (``test_<consumer>.py``) imports these tests and names its consumer,
so that ``pytest -n N --dist loadscope`` plays the four consumers side by side, each module's
runs on one worker (with the worker's own broker).  Inside a module, the runs go two at a time:
most of a consumer run is waiting (pauses, sessions, quiet intervals).  A finding on a correct
consumer is a bug in the consumer or a check that assumes the reference consumer's shape;
neither is hidden: the message lists every finding.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness._profiles import get_profile
from harness.consumer._brokers import sharing
from harness.services._kafka import KafkaServer
from harness.services._toxiproxy import ToxiproxyServer
from tests.kafka_corpus.play import play, target_named
from tests.kafka_corpus.support import FLAWS, Flaw, installed
from tests.missing import missing

__all__ = ["EXPLORE_EXAMPLES", "FLAW_EXAMPLES", "SEED", "plays",
           "test_a_correct_consumer_has_no_finding",
           "test_a_seeded_explore_of_a_correct_consumer_finds_nothing",
           "test_each_flaw_is_caught_by_explore", "test_each_flaw_is_caught_by_run"]

SEED = 7
#: Examples a seeded exploration of a correct consumer draws beside the opening's stories.
EXPLORE_EXAMPLES = 2
#: The budget within which an exploration must find a flaw (the opening finds each here).
FLAW_EXAMPLES = 20 if get_profile().require_services else 60
#: Runs of one module at once.
AT_ONCE = 2
#: A run: (flaw or None, "run" or "explore").
Job = tuple[str | None, str]


def _findings(results: dict[str, Any]) -> list[str]:
    return [f"{s['name']}: {f['property']} {f['message']}"
            for s in results["scenarios"] for f in s["findings"]]


@pytest.fixture(scope="module")
def plays(consumer: str, kafka_server: KafkaServer, toxiproxy_server: ToxiproxyServer,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Job, dict[str, Any]]]:
    """Every run of ``consumer``: its correct mode over the Kafka catalog and explored, and
    each of its flaws over the scenario that shows it and explored (first failure only)."""
    if not installed(consumer):
        missing(f"the Kafka corpus consumer {consumer} is not installed: run `make kafka-corpus` "
                "(tests/kafka_corpus/install-all)", kind="corpus consumer")
    flaws = [f for f in FLAWS if f.consumer == consumer]
    jobs: list[tuple[Job, dict[str, Any]]] = [
        ((None, "run"), {}), ((None, "explore"), {"explore_examples": EXPLORE_EXAMPLES})]
    for flaw in flaws:
        jobs.append(((flaw.name, "run"), {"scenarios": [flaw.scenario]}))
        jobs.append(((flaw.name, "explore"), {"explore_examples": FLAW_EXAMPLES,
                                              "first_only": True}))

    def one(job: tuple[Job, dict[str, Any]]) -> tuple[Job, dict[str, Any]]:
        (flaw, front), options = job
        report: Path = tmp_path_factory.mktemp(f"{consumer}-{flaw or 'correct'}-{front}")
        return job[0], play(target_named(consumer, flaw), report, seed=SEED,
                            toxiproxy=toxiproxy_server, **options)

    with sharing(kafka_server), ThreadPoolExecutor(AT_ONCE) as pool:
        yield dict(pool.map(one, jobs))


def test_a_correct_consumer_has_no_finding(consumer: str,
                                           plays: dict[Job, dict[str, Any]]) -> None:
    results = plays[(None, "run")]
    assert results["complete"]
    findings = _findings(results)
    assert not findings, (f"false findings on the correct consumer {consumer}:\n"
                          + "\n".join(findings))
    judged = [s for s in results["scenarios"] if s["verdict"] != "n/a"]
    assert len(judged) >= 9, [(s["name"], s["reason"]) for s in results["scenarios"]]
    undecided = {s["name"]: s.get("unknown_reasons") for s in judged if s["verdict"] != "pass"}
    assert not undecided, undecided
    outcomes = results["queue_account"]["outcomes"]
    assert outcomes["lost"] == 0 and outcomes["duplicated"] == 0, outcomes


def test_a_seeded_explore_of_a_correct_consumer_finds_nothing(
        consumer: str, plays: dict[Job, dict[str, Any]]) -> None:
    """The opening's stories (a lost ack met in the pause after the work, a kill in the job, a
    rebalance, a rewind...) and a few drawn ones, on a consumer someone else wrote: no
    finding, nothing lost or doubled, every story judged."""
    results = plays[(None, "explore")]
    findings = _findings(results)
    assert not findings, f"false findings exploring {consumer}:\n" + "\n".join(findings)
    assert results["verdict"] == "pass", results["scenarios"][0]["reason"]
    numbers = results["extra"]["explore"]
    assert numbers["examples"] > EXPLORE_EXAMPLES and numbers["publishes"] > 0, numbers
    outcomes = results["queue_account"]["outcomes"]
    assert outcomes["lost"] == 0 and outcomes["duplicated"] == 0, outcomes


def _consumer_flaws(consumer: str) -> list[Flaw]:
    flaws = [f for f in FLAWS if f.consumer == consumer]
    assert len(flaws) >= 2, consumer
    return flaws


def test_each_flaw_is_caught_by_run(consumer: str, plays: dict[Job, dict[str, Any]]) -> None:
    missed = []
    for flaw in _consumer_flaws(consumer):
        (scenario,) = plays[(flaw.name, "run")]["scenarios"]
        named = {f["property"] for f in scenario["findings"]}
        if scenario["verdict"] != "fail" or not named & set(flaw.properties):
            missed.append(f"--flaw {flaw.name}: {flaw.scenario} gave {scenario['verdict']} "
                          f"({scenario.get('reason') or scenario.get('unknown_reasons')}) with "
                          f"findings {sorted(named) or 'none'}; expected one of "
                          f"{', '.join(flaw.properties)}")
    assert not missed, "\n".join(missed)


def test_each_flaw_is_caught_by_explore(consumer: str,
                                        plays: dict[Job, dict[str, Any]]) -> None:
    missed = []
    for flaw in _consumer_flaws(consumer):
        results = plays[(flaw.name, "explore")]
        named = {f["property"] for f in results["scenarios"][0]["findings"]}
        if results["verdict"] != "fail" or not named & set(flaw.properties):
            numbers = results["extra"]["explore"]
            missed.append(f"--flaw {flaw.name}: explore gave {results['verdict']} after "
                          f"{numbers['examples']} examples with findings "
                          f"{sorted(named) or 'none'}; expected one of "
                          f"{', '.join(flaw.properties)}")
    assert not missed, "\n".join(missed)

"""The corpus of independent correct queue consumers (issue 25): the harness must find nothing
wrong with any of them, and must catch each of their named flaws by the property it breaks.

Four consumers on four published clients (kombu, FastStream, amqp-connection-manager,
amqp091-go), none importing the harness or the reference server, each choosing differently
(README.md).  A finding on a correct consumer is a bug in the consumer or a check that assumes
the reference consumer's shape; neither is hidden: the message lists every finding.

Every run is a process of its own (``play.py``) against the session's broker and Toxiproxy,
four at a time: most of a consumer run is waiting (pauses, heartbeats, quiet intervals), so
side by side the corpus fits the suite's budget.  Beside the scenarios, each correct consumer
gets a seeded exploration of a few examples (``EXPLORE_EXAMPLES``), which must find nothing,
and each consumer started with several flaws at once (``flaws.toml``'s ``[[combined]]``) one
exploration per seed, which must report every one of them (issue 37; under CI, the modes
marked ``ci`` at one seed: tests/corpus/multiflaw.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness._profiles import in_ci
from harness.consumer import ConsumerTarget
from harness.consumer._target import ConsumerPromises
from harness.services._rabbitmq import RabbitServer
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._loader import load_target
from tests.bounded import run_for_at_most
from tests.consumer_corpus.conftest import CONSUMERS, STAMPS, Flaw, flaws, require
from tests.corpus.multiflaw import Mode, chosen, consumer_modes, told, unreported

CONSUMER_NAMES = tuple(STAMPS)
FLAWS = flaws()
PARALLEL = 4
#: Examples a seeded exploration of each correct consumer draws (``play.py --explore``).
EXPLORE_EXAMPLES = 3
#: Examples the exploration of a consumer with several flaws draws after its opening, which
#: tells each of their stories (a lost ack, copies at once, a failed job, a kill...): under CI
#: one (kombu_inbox's mode in 30 s; three took 177 s, each kill story drawn and shortened).
COMBINED_EXAMPLES = 1 if in_ci() else 3
COMBINED = chosen(consumer_modes())
#: A run: (consumer, flaw or None, "run" or "explore"); with several flaws, (consumer, the
#: flaws joined by "+", "explore-SEED").
Job = tuple[str, str | None, str]
ROOT = Path(__file__).parents[2]


def _findings(results: dict[str, Any]) -> list[str]:
    return [f"{s['name']}: {f['property']} {f['message']}"
            for s in results["scenarios"] for f in s["findings"]]


def test_the_corpus_covers_every_choice_and_each_consumer_has_a_flaw() -> None:
    targets = {n: load_target(CONSUMERS.parent / "targets" / f"{n}.toml")
               for n in CONSUMER_NAMES}
    assert len(targets) >= 4 and all(isinstance(t, ConsumerTarget) for t in targets.values())
    consumer = {n: t for n, t in targets.items() if isinstance(t, ConsumerTarget)}
    assert {f.consumer for f in FLAWS} == set(CONSUMER_NAMES)
    assert {f.name for f in FLAWS} >= {"ack-before-work", "dedup-outside-txn", "message-id-only",
                                       "body-bytes", "claim-kept-on-failure", "short-ttl"}
    assert {t.message.dedup for t in consumer.values()} >= {"header", "body"}
    assert any(t.hooks.events is None for t in consumer.values())
    assert any(t.hooks.events is not None for t in consumer.values())
    assert any(t.hooks.pause is not None and t.hooks.pause.field for t in consumer.values())
    assert any(t.clock is not None for t in consumer.values())
    policies = {(p.on_failure, p.max_attempts) for t in consumer.values()
                if isinstance(p := t.promises, ConsumerPromises)}
    assert ("requeue", None) in policies and ("requeue", 3) in policies
    sources = {n: next(CONSUMERS.joinpath(n).glob("consumer.*"), None)
               or CONSUMERS / n / "main.go" for n in CONSUMER_NAMES}
    for name, source in sources.items():
        imports = re.findall(r"^\s*(?:from|import)\s+(\w+)", source.read_text(encoding="utf-8"),
                             re.MULTILINE)
        assert not {"harness", "reference_server", "tests", "scenarios"} & set(imports), name


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, rabbitmq_server: RabbitServer,
         toxiproxy_server: ToxiproxyServer) -> dict[Job, Path]:
    """Every correct consumer over the whole consumer catalog and explored with a seed, and
    each flaw over the scenario that shows it: the run's report directory by ``Job``."""
    for name in CONSUMER_NAMES:
        require(name)  # a missing install fails (CI) or skips here
    env = {**os.environ, "IDEM_AMQP_URL": rabbitmq_server.url,
           "TOXIPROXY_URL": toxiproxy_server.url}
    jobs: dict[Job, tuple[Path, list[str]]] = {}
    for name in CONSUMER_NAMES:
        jobs[(name, None, "run")] = (tmp_path_factory.mktemp(f"{name}-correct"), [])
        jobs[(name, None, "explore")] = (tmp_path_factory.mktemp(f"{name}-explore"),
                                         ["--explore", str(EXPLORE_EXAMPLES)])
    for flaw in FLAWS:
        jobs[(flaw.consumer, flaw.name, "run")] = (
            tmp_path_factory.mktemp(f"{flaw.consumer}-flaw"),
            ["--flaw", flaw.name, "--scenario", flaw.scenario])
    for mode, seed in COMBINED:
        jobs[_combined(mode, seed)] = (
            tmp_path_factory.mktemp(f"{mode.target}-combined"),
            [*mode.start_args, "--explore", str(COMBINED_EXAMPLES), "--seed", str(seed),
             "--shrink-time", "5"])

    def play(job: Job) -> None:
        report, extra = jobs[job]
        done = run_for_at_most(
            [sys.executable, "-m", "tests.consumer_corpus.play",
             str(CONSUMERS.parent / "targets" / f"{job[0]}.toml"), str(report), *extra],
            600, env=env, cwd=ROOT)
        over = "the play took over 600 s\n" if done.timed_out else ""
        (report / "stderr.txt").write_text(over + done.stdout + done.stderr)

    def slowest_first(job: Job) -> tuple[int, bool]:
        """So the pool ends together: the correct runs, the explorations of several flaws,
        the correct explorations, the flaws' runs; faststream_redis first in each."""
        name, flaw, kind = job
        step = (0 if flaw is None and kind == "run" else 1 if kind.startswith("explore-")
                else 2 if flaw is None else 3)
        return step, name != "faststream_redis"

    order = sorted(jobs, key=slowest_first)
    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(play, order))
    return {job: report for job, (report, _) in jobs.items()}


def _combined(mode: Mode, seed: int) -> Job:
    return (mode.target, "+".join(mode.flaws), f"explore-{seed}")


def _results(report: Path) -> dict[str, Any]:
    assert (report / "results.json").exists(), (report / "stderr.txt").read_text()
    results: dict[str, Any] = json.loads((report / "results.json").read_text())
    return results


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", CONSUMER_NAMES)
def test_a_correct_consumer_has_no_finding(name: str, runs: dict[Job, Path]) -> None:
    results = _results(runs[(name, None, "run")])
    assert results["complete"]
    findings = _findings(results)
    assert not findings, f"false findings on the correct consumer {name}:\n" + "\n".join(findings)
    judged = [s for s in results["scenarios"] if s["verdict"] != "n/a"]
    assert len(judged) >= 7, [(s["name"], s["reason"]) for s in results["scenarios"]]
    assert results["queue_account"]["outcomes"]["lost"] == 0
    assert results["queue_account"]["outcomes"]["duplicated"] == 0


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("flaw", FLAWS, ids=[f"{f.consumer}-{f.name}" for f in FLAWS])
def test_each_flaw_is_caught_by_the_property_it_breaks(flaw: Flaw,
                                                       runs: dict[Job, Path]) -> None:
    results = _results(runs[(flaw.consumer, flaw.name, "run")])
    (scenario,) = results["scenarios"]
    named = sorted({f["property"] for f in scenario["findings"]})
    assert scenario["verdict"] == "fail" and set(named) & set(flaw.properties), (
        f"{flaw.consumer} --flaw {flaw.name}: {flaw.scenario} gave {scenario['verdict']} "
        f"({scenario.get('reason') or scenario.get('unknown_reasons')}) with findings "
        f"{named or 'none'}; expected one of {', '.join(flaw.properties)}")


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", CONSUMER_NAMES)
def test_a_seeded_explore_of_a_correct_consumer_finds_nothing(
        name: str, runs: dict[Job, Path]) -> None:
    """Stories of publishes, copies, republishes, lost acks, kills, stalls, clock jumps and
    poison messages on a consumer someone else wrote: no finding, nothing lost or doubled,
    and every story judged (a step whose moment was not shown would leave it unknown)."""
    report = runs[(name, None, "explore")]
    results = _results(report)
    findings = _findings(results)
    assert not findings, f"false findings exploring {name}:\n" + "\n".join(findings)
    assert results["verdict"] == "pass", results["scenarios"][0]["reason"]
    numbers = results["extra"]["explore"]
    # the opening's stories the consumer has the operations for (up to seven), then the budget
    opening = numbers["examples"] - EXPLORE_EXAMPLES
    assert 0 < opening <= 7 and numbers["publishes"] > 0, numbers
    assert not (report / "story.json").exists()
    account = results["queue_account"]
    assert account["outcomes"]["lost"] == 0 and account["outcomes"]["duplicated"] == 0


@pytest.mark.timeout(300)
def test_a_clock_the_consumer_does_not_show_moving_makes_clock_scenarios_not_applicable(
        rabbitmq_server: RabbitServer, toxiproxy_server: ToxiproxyServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """[clock] kind = "faketime" is confirmed on the consumer's check path; a consumer that
    cannot show the jump there runs without a clock: late-redelivery is n/a, saying why, never
    a pass on a clock that did not move."""
    from harness._runner import RunConfig
    from harness.consumer import run_target
    from scenarios import get_scenario

    target = load_target(require("kombu_inbox"))
    assert isinstance(target, ConsumerTarget) and target.clock is not None
    blind = target.model_copy(update={"clock": target.clock.model_copy(
        update={"check": "/health"})})  # answers {"ok": true}: no time in it
    monkeypatch.setenv("IDEM_AMQP_URL", rabbitmq_server.url)
    result = run_target(RunConfig(target=blind, scenarios=[get_scenario("late-redelivery")],
                                  report_dir=tmp_path, seed=7, toxiproxy=toxiproxy_server))
    (outcome,) = result.outcomes
    assert outcome.verdict == "n/a"
    assert "cannot tell whether the target's clock moved" in (outcome.reason or "")


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("job", COMBINED, ids=[f"{m.name}-seed{seed}" for m, seed in COMBINED])
def test_one_exploration_reports_every_flaw_of_a_consumer_with_several(
        job: tuple[Mode, int], runs: dict[Job, Path]) -> None:
    """Each flaw of the mode is a failure of its own that names one of its properties."""
    mode, seed = job
    results = _results(runs[_combined(mode, seed)])
    failures = results["extra"]["explore"].get("failures", [])
    missed = unreported(mode, failures)
    assert not missed, (
        f"{mode.name} at seed {seed}: {', '.join(missed)} not reported as a failure of its own; "
        f"the exploration kept:\n{told(failures)}")
    assert results["verdict"] == "fail" and results["complete"], results["verdict"]


@pytest.mark.timeout(60)
def test_node_acm_refuses_its_two_flaws_at_once_saying_why() -> None:
    """Both flaws choose what a message is deduplicated on: the consumer exits 2 before it
    connects to anything, naming both and why, as the reference server does."""
    require("node_acm")
    done = subprocess.run(
        ["node", str(CONSUMERS / "node_acm" / "consumer.js"), "--amqp-url", "amqp://127.0.0.1:9",
         "--queue", "q", "--dlq", "q.dead", "--redis", "redis://127.0.0.1:9", "--port", "9",
         "--flaw", "message-id-only", "--flaw", "body-bytes"],
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert ("error: flaws message-id-only and body-bytes cannot be combined: both choose what "
            "a message is deduplicated on") in done.stderr, done.stderr

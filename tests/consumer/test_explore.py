"""``explore`` for queue consumers (issue 25, item 5), end to end: the real reference consumer
on the session's real RabbitMQ, the real Toxiproxy, the same checker as ``run``.  A seeded
exploration of the correct consumer finds nothing and says what it sent; a flaw a consumer
scenario catches is caught, shrunk, saved and replayed; stopped, it still reports, marked
incomplete; the commands take a consumer's target file and ``--reference-consumer``; and a
consumer's story is saved, read back and checked before it runs as an HTTP one is."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness._interrupts import Interrupted
from harness._outcomes import Progress, RunEvent
from harness.consumer import reference_consumer_target
from harness.consumer._context import COPIES_PAUSE_LATENCIES, COPIES_PAUSE_MS
from harness.consumer._reference import REFERENCE_CONSUMER
from harness.consumer.explore._actions import (
    ConsumerAction,
    Copies,
    FailingJob,
    Kill,
    LostAck,
    Poison,
    Publish,
    Republish,
    Restart,
    StallMidJob,
)
from harness.consumer.explore._validity import problems_with
from harness.explore import (
    ExploreConfig,
    ReplayConfig,
    Story,
    StoryStep,
    explore,
    load_story,
    render_story,
    replay,
)
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._keys import KeyPlan
from harness.reports import ReportDirectory
from harness.services._toxiproxy import ToxiproxyServer
from reference_server.consumer.flaws import CONSUMER_FLAWS

ROOT = Path(__file__).resolve().parents[2]
#: Short examples and little shrinking: the suite shares a 2-core machine.
STEPS = 8
SHRINK_SECONDS = 15.0


def test_a_seeded_explore_of_the_correct_reference_consumer_passes(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    done = explore(ExploreConfig(target=reference_consumer_target(store=None, flaw=None),
                                 max_examples=3, seed=2, steps=STEPS, report_dir=tmp_path,
                                 toxiproxy=toxiproxy_server), [ReportDirectory(tmp_path)])
    assert done.story is None and done.result.verdict == "pass", (
        done.result.findings, done.result.outcomes[0].reason)
    results = json.loads((tmp_path / "results.json").read_text())
    numbers = results["extra"]["explore"]
    # The opening's seven stories, then Hypothesis's three.
    assert numbers["examples"] == 7 + 3 and numbers["steps"] > 0 and numbers["publishes"] > 0
    account = results["queue_account"]
    assert account["published"] >= numbers["publishes"] // 2 and account["feed"] is True
    outcomes = account["outcomes"]
    assert account["keys"] > 0 and outcomes["ok"] > 0
    # Every job ran as often as it may: ok, or recovered (a publish whose confirm was lost).
    assert outcomes["ok"] + outcomes["recovered"] == account["keys"], outcomes
    assert not (tmp_path / "story.json").exists()
    assert (tmp_path / "history.jsonl").read_text().count('"publish"') >= numbers["publishes"]


#: The fastest of the reference consumer's flaws to find (bench/explorer.py --consumer finds
#: every one): a republish under a new message id, and copies at once to two consumers.
@pytest.mark.parametrize("flaw", ["message-id-only", "check-then-insert"])
def test_a_flaw_a_scenario_catches_is_found_shrunk_saved_and_replayed(
        flaw: str, broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    target = reference_consumer_target(store=None, flaw=flaw)
    report = tmp_path / "explore"
    done = explore(ExploreConfig(target=target, max_examples=12, seed=1, steps=STEPS,
                                 report_dir=report, toxiproxy=toxiproxy_server,
                                 shrink_seconds=SHRINK_SECONDS, first_only=True),
                   [ReportDirectory(report)])
    story = done.story
    assert story is not None and done.story_path == report / "story.json", done.result.verdict
    assert story.front == "consumer" and story.machine == "ConsumerMachine"
    assert set(story.properties) & set(CONSUMER_FLAWS[flaw].properties), story.properties
    assert story.shrunk and story.operations <= 3, [s.text for s in story.steps]
    results = json.loads((report / "results.json").read_text())
    assert results["verdict"] == "fail" and results["queue_account"]["keys"] >= 1
    findings = results["scenarios"][0]["findings"]
    assert all(f["reproduce"] == f"idem-harness replay {done.story_path}" for f in findings)

    again = replay(load_story(report / "story.json"),
                   ReplayConfig(target=target, report_dir=tmp_path / "replay",
                                toxiproxy=toxiproxy_server),
                   [ReportDirectory(tmp_path / "replay")])
    assert again.reproduced and again.result.exit_code == 1, again.story.properties
    assert [s.action for s in again.story.steps if not s.settle] == story.actions()


#: Reference consumer flaws and the opening story that shows each (its place in the opening):
#: before it, Hypothesis's first examples published the same new job again and again.
FOUND_IN_THE_OPENING = {
    "message-id-only": 1,  # a job republished under a new message id
    "check-then-insert": 2,  # copies at once
    "short-dedup-window": 3,  # a republish just within the dedup window
}


@pytest.mark.parametrize("flaw", FOUND_IN_THE_OPENING)
def test_the_opening_finds_each_common_flaw_in_its_own_story(
        flaw: str, broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    done = explore(ExploreConfig(target=reference_consumer_target(store=None, flaw=flaw),
                                 max_examples=1, seed=1, steps=STEPS, report_dir=tmp_path,
                                 toxiproxy=toxiproxy_server, shrink_seconds=5, first_only=True))
    found = done.result.extra["explore"]
    assert isinstance(found, dict) and done.story is not None, flaw
    assert found["examples_to_failure"] <= FOUND_IN_THE_OPENING[flaw]
    assert set(done.story.properties) & set(CONSUMER_FLAWS[flaw].properties)


class _StopAtExample:
    """Stops the exploration as Ctrl-C does, as its second example starts."""

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, Progress) and event.examples == 2:
            raise Interrupted(signal.SIGINT)


def test_stopped_it_reports_what_it_sent_marked_incomplete(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    done = explore(ExploreConfig(target=reference_consumer_target(store=None, flaw=None),
                                 max_examples=10, seed=4, steps=STEPS, report_dir=tmp_path,
                                 toxiproxy=toxiproxy_server),
                   [ReportDirectory(tmp_path), _StopAtExample()])
    assert done.result.exit_code == 130
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["complete"] is False and results["stopped_by"] == "SIGINT"
    assert results["verdict"] == "incomplete"
    for name in ("junit.xml", "index.html", "history.jsonl"):
        assert (tmp_path / name).exists(), name


def test_the_commands_explore_a_consumer_file_and_replay_what_the_reference_consumer_broke(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    env = {**os.environ, "IDEM_AMQP_URL": broker, "TOXIPROXY_URL": toxiproxy_server.url}

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)

    clean = harness("explore", "--target", str(REFERENCE_CONSUMER), "--max-examples", "1",
                    "--seed", "3", "--report-dir", str(tmp_path / "file"), "--quiet")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    # the opening's seven stories and one drawn
    assert "No story failed: 8 examples" in clean.stdout and "publishes" in clean.stdout
    found = harness("explore", "--reference-consumer", "--flaw", "no-dedup", "--seed", "1",
                    "--max-examples", "10", "--shrink-time", "10s", "--first-only",
                    "--report-dir", str(tmp_path / "flaw"), "--quiet")
    assert found.returncode == 1, found.stdout + found.stderr
    assert "state = ConsumerMachine()" in found.stdout and "Traceback" not in found.stderr
    again = harness("replay", str(tmp_path / "flaw" / "story.json"),
                    "--report-dir", str(tmp_path / "replay"), "--quiet")
    assert again.returncode == 1, again.stdout + again.stderr
    assert "P1: reproduced" in again.stdout
    wrong = harness("replay", str(tmp_path / "flaw" / "story.json"), "--reference")
    assert wrong.returncode == 2 and "queue consumer" in wrong.stderr


def _story(*actions: ConsumerAction) -> Story[ConsumerAction]:
    return Story(front="consumer", machine="ConsumerMachine", seed=0, examples=0, seconds=0.0,
                 target="reference-consumer",
                 steps=[StoryStep(number=n, kind=a.op, text=a.text(), action=a)
                        for n, a in enumerate(actions, start=1)])


def test_after_a_lost_ack_the_lease_of_any_claim_the_cut_left_runs_out(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """A consumer cut off (or killed) in the middle of another key's job may leave its claim:
    the redelivery rightly waits for the lease, so the story lets it run out (on the clock
    here) before the drain.  Without it the correct faststream consumer's failing job was
    still waiting 18 s into its 30 s lease when the drain judged it "keeps coming back"."""
    target = reference_consumer_target(store=None, flaw=None)
    lease = target.promises.lease
    assert lease is not None
    story = _story(LostAck(id="o1", key=KeyPlan(name="k1", shape="plain"), then="cut"))
    done = replay(story, ReplayConfig(target=target, report_dir=tmp_path,
                                      toxiproxy=toxiproxy_server))
    assert done.result.verdict == "pass", done.result.findings
    jumps = [e.value["seconds"] for o in done.result.outcomes for e in o.events
             if e.f == "clock"]
    assert any(seconds > lease for seconds in jumps), jumps


def test_copies_pause_as_long_as_the_consumers_job_latency_asks(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """On a slow machine the second consumer took its copy after the first job had committed,
    and every exploration of faststream_redis was unknown ("copies overlapped not shown"):
    copies now pause for several job latencies when that is longer than a second."""
    target = reference_consumer_target(store=None, flaw=None)
    story = _story(Copies(id="o1", key=KeyPlan(name="k1", shape="plain"), copies=2))
    done = replay(story, ReplayConfig(target=target, report_dir=tmp_path,
                                      toxiproxy=toxiproxy_server))
    assert done.result.verdict == "pass", done.result.findings
    events = [e for o in done.result.outcomes for e in o.events]
    [latency] = {e.value["seconds"] for e in events if e.f == "latency"}
    paused = [e.value["pause"]["seconds"] for e in events
              if e.f == "publish" and e.type == "invoke" and e.label == "copy"]
    assert len(paused) == 2, paused
    assert all(p == max(COPIES_PAUSE_MS, int(COPIES_PAUSE_LATENCIES * latency * 1000)) / 1000
               for p in paused), (paused, latency)


@pytest.mark.parametrize("fault", ["connection-cut", "connection-stall"])
def test_after_a_connection_fault_the_drain_allows_for_a_claim_it_may_have_left(
        fault: str, broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """A job a slow machine had not finished when its consumer was cut off may leave a claim,
    and its redelivery rightly waits for the lease: faststream_redis's drain gave up 15 s
    into its 30 s lease, and the exploration was unknown.  The drain now allows the lease (in
    real time: the job may still run, so the clock is not moved); it still ends once settled."""
    target = reference_consumer_target(store=None, flaw=None)
    lease = target.promises.lease
    assert lease is not None
    done = replay(_story(FaultOn(fault=fault), FaultOff(fault=fault)),
                  ReplayConfig(target=target, report_dir=tmp_path, toxiproxy=toxiproxy_server))
    assert done.result.verdict == "pass", done.result.findings
    [drain] = [e for o in done.result.outcomes for e in o.events if e.f == "drain"]
    assert drain.value["settled"] and drain.value["allowed"] > lease, drain.value
    assert drain.value["waited"] < lease  # nothing was left to wait for


def test_a_consumer_story_is_saved_and_read_back_in_the_consumer_vocabulary(
        tmp_path: Path) -> None:
    story = _story(Publish(id="o1", key=KeyPlan(name="k1", shape="plain"), confirm="lost"),
                   Clock(seconds=700, why="a few minutes"), Republish(id="o1", copies=2),
                   Kill(id="o2", key=KeyPlan(name="k2", shape="plain")), Kill(), Restart(),
                   FaultOn(fault="connection-stall"), FaultOff(fault="connection-stall"))
    path = tmp_path / "story.json"
    path.write_text(story.to_json())
    again = load_story(path)
    assert again.front == "consumer" and again.actions() == story.actions()
    assert "state = ConsumerMachine()" in render_story(again)
    assert "state.republish(o1, copies=2)" in render_story(again)


def test_a_consumer_story_that_cannot_run_is_refused_with_each_problem() -> None:
    target = reference_consumer_target(store=None, flaw=None)
    blind = target.model_copy(update={"hooks": target.hooks.model_copy(
        update={"events": None, "clock": None, "work_failures": []})})
    problems = problems_with([
        Republish(id="o9"),
        Poison(id="o1", key=KeyPlan(name="k1", shape="plain")),
        Republish(id="o1"),
        FaultOff(fault="connection-cut"),
        Clock(seconds=60),
        StallMidJob(id="o2", key=KeyPlan(name="k2", shape="plain")),
        FailingJob(id="o3", key=KeyPlan(name="k3", shape="plain"), failure="fails-always"),
    ], blind)
    said = "\n".join(problems)
    assert "republishes job o9, which no earlier step made" in said
    assert "republishes job o1, whose key may never have an effect" in said
    assert "heals a fault that is not on" in said
    assert "clock" in said and "no events feed" in said
    assert "declares no work failure 'fails-always'" in said
    assert problems_with([Publish(id="o1", key=KeyPlan(name="k1", shape="plain")),
                          Republish(id="o1")], target) == []

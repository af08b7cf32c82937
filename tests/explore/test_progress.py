"""The explorer's time to a verdict and what it shows while it works (issue 17 part 1, issue 14
items 11 and 15): shrinking stops once the story is as short as its property allows, the live
line names the phase and the example count, and a run in which nothing failed keeps the history
of every example it ran."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import cast

from rich.console import Console

from harness._outcomes import Progress, RunEvent, ScenarioFinished, ScenarioStarted
from harness.explore import ExploreConfig, ReplayConfig, explore, replay
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._failure import Failure
from harness.explore._keys import KeyPlan
from harness.explore._minimise import STALL_ATTEMPTS, drop_steps, enough, tidied
from harness.explore._report import outcome_of
from harness.explore._steps import StepRecord
from harness.http.explore._actions import Action, NewRequest, Retry, Reuse
from harness.http.explore._session import Session
from harness.http.explore._validity import problems_with
from harness.judging._checker import CheckResult
from harness.judging._findings import Finding
from harness.reports import ConsoleReport, ReportDirectory
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from tests.explore.test_explorer import BODY, hand_written


class Recorder:
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def handle(self, event: RunEvent) -> None:
        self.events.append(event)


def test_the_phases_and_the_example_count_are_told_as_the_explorer_goes(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    heard = Recorder()
    done = explore(ExploreConfig(target=reference_target(store=None, flaw="key-only"),
                                 max_examples=30, seed=1, report_dir=tmp_path,
                                 toxiproxy=toxiproxy_server), [heard])
    story = done.story
    said = (done.result.extra["explore"], [n.message for o in done.result.outcomes
                                           for n in o.notes])
    assert story is not None and story.operations <= 2, (story, said)  # a request, its retry
    every = [e for e in heard.events if isinstance(e, Progress)]
    # A story a moved clock broke is told again in real time between two examples (a busy
    # machine can make key-only's stories time out into one): said, but no example of its own.
    progress = [e for e in every if e.phase != "confirming in real time"]
    order = ["drawing", "shrinking", "minimising"]
    phases = [p.phase for p in progress]
    assert phases[:story.examples] == ["drawing"] * story.examples
    assert set(phases) <= set(order)
    # each hunt draws, shrinks, drops steps; the next hunt draws again
    assert all(order.index(b) >= order.index(a) or b == "drawing"
               for a, b in pairwise(phases)), phases
    runs = done.result.extra["explore"]["runs"]  # type: ignore[index]
    assert [p.examples for p in progress] == list(range(1, runs + 1))


def _session(*, operations: int, prop: str, examples: int, improved_at: int,
             found_after: float, started: float) -> Session:
    finding = Finding(property=prop, key="k", message="m", events=(0,))
    check = CheckResult({}, [finding], [])
    steps = tuple(StepRecord(n, "request", "", None) for n in range(1, operations + 1))
    best = Failure(steps, (), check, (prop,), None, None, 1)
    return cast(Session, SimpleNamespace(best=best, hunt_found=(1, found_after),
                                         hunt_started=started, examples=examples,
                                         improved_at=improved_at))


def test_shrinking_stops_when_minimal_stalled_or_as_long_again_as_finding_took() -> None:
    now = time.monotonic()
    assert enough(_session(operations=1, prop="P1", examples=3, improved_at=3, found_after=1,
                           started=now), limit=60) == "minimal"
    assert enough(_session(operations=2, prop="P4", examples=3, improved_at=3, found_after=1,
                           started=now), limit=60) == "minimal"
    assert enough(_session(operations=2, prop="P1", examples=3, improved_at=3, found_after=1,
                           started=now), limit=60) is None
    assert enough(_session(operations=3, prop="P1", examples=3 + STALL_ATTEMPTS, improved_at=3,
                           found_after=1, started=now), limit=60) == "stalled"
    # Found after 10 s, 30 s ago: the shrinking time (10 s + the slack) is over.
    assert enough(_session(operations=3, prop="P1", examples=4, improved_at=3, found_after=10,
                           started=now - 30), limit=60) == "time"
    assert enough(_session(operations=3, prop="P1", examples=4, improved_at=3, found_after=10,
                           started=now - 12), limit=60) is None
    assert enough(_session(operations=3, prop="P1", examples=4, improved_at=3, found_after=10,
                           started=now - 12), limit=1) == "time"


def test_the_cited_steps_alone_are_tried_even_when_the_time_ran_over() -> None:
    """On a loaded machine Hypothesis's share of the shrinking time can run over by a whole
    example; the story of only the steps the checker cited is still tried once (key-only kept
    four steps that changed nothing before its burst)."""
    steps: tuple[StepRecord[Action], ...] = tuple(StepRecord(n, "request", "", NewRequest(
        id=f"o{n}", tenant="a", key=KeyPlan(name=f"k{n}", shape="plain"), body=BODY),
        first_event=2 * (n - 1), last_event=2 * n) for n in range(1, 6))
    finding = Finding(property="P3", key="k", message="m", events=(8, 9))
    check = CheckResult({}, [finding], [])
    failure: Failure[Action] = Failure(steps, (), check, ("P3",), None, None, 1)
    played: list[list[Action]] = []

    def play(actions: list[Action]) -> SimpleNamespace:
        played.append(actions)
        kept = tuple(s for s in steps if s.action in actions)
        return SimpleNamespace(failure=Failure(kept, (), check, ("P3",), None, None, 2))

    session = cast(Session, SimpleNamespace(fewest_steps={}, problems_with=lambda _: [],
                                            play=play))
    best = drop_steps(session, failure, deadline=time.monotonic() - 1)
    assert played == [[steps[4].action]] and best.operations == 1


def _always_breaking(check: CheckResult, prop: str,
                     problems: Callable[[list[Action]], list[str]] = lambda _: [],
                     ) -> tuple[Session, list[list[Action]]]:
    """A session in which every story ``drop_steps`` plays breaks ``prop`` as ``check`` says
    (``problems``: what keeps a story from running), and the stories it was asked to play."""
    played: list[list[Action]] = []

    def play(actions: list[Action]) -> SimpleNamespace:
        played.append(actions)
        kept = tuple(StepRecord(n, "step", "", a) for n, a in enumerate(actions, 1))
        return SimpleNamespace(failure=Failure(kept, (), check, (prop,), None, None, 2))

    session = SimpleNamespace(fewest_steps={}, problems_with=problems, play=play)
    return cast(Session, session), played


def test_the_cited_steps_with_the_rest_of_their_keys_steps_are_tried_when_alone_they_cannot_run(
        ) -> None:
    """no-body-hash at seed 3 kept eight steps: the checker cited a retry and a reuse, which
    cannot run without the request they name, and halving runs of steps ran out of time.  The
    cited steps with every other step of their key and the jumps among them (the retry took
    the key over past its lease) are a story of four."""
    def request(n: int, tenant: str) -> NewRequest:
        return NewRequest(id=f"o{n}", tenant=tenant, key=KeyPlan(name=f"k{n}", shape="plain"),
                          body=BODY)
    story: list[Action] = [request(1, "a"), Clock(seconds=35), request(2, "b"),
                           Clock(seconds=35), Retry(id="o2"), request(3, "a"),
                           Reuse(id="o2", change="body", body={**BODY, "amount": 7})]
    keys = [("a", "k1"), None, ("b", "k2"), None, ("b", "k2"), ("a", "k3"), ("b", "k2")]
    steps = tuple(StepRecord(n, "step", "", action, first_event=n - 1, last_event=n,
                             identity=key)
                  for n, (action, key) in enumerate(zip(story, keys, strict=True), 1))
    finding = Finding(property="P4", key="k2", message="m", events=(4, 6))
    check = CheckResult({}, [finding], [])
    target = reference_target(store=None, flaw=None)
    session, played = _always_breaking(
        check, "P4", problems=lambda actions: problems_with(actions, target))
    best = drop_steps(session, Failure(steps, (), check, ("P4",), None, None, 1),
                      deadline=time.monotonic() - 1)
    assert played == [[story[2], story[3], story[4], story[6]]] and best.operations == 4


def test_jumps_in_a_row_become_one_and_a_fault_healed_at_once_is_left_out() -> None:
    """short-ttl's story at seed 1 kept ten steps: four jumps, each needed for their sum to
    pass the retention (no single one could be dropped), and two faults switched on and healed
    with nothing between.  Tidied, it is five, tried once even when the time ran over."""
    charge = NewRequest(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), body=BODY)
    story: list[Action] = [
        FaultOn(fault="response-cut"), charge, FaultOff(fault="response-cut"),
        FaultOn(fault="response-timeout"), FaultOff(fault="response-timeout"),
        FaultOn(fault="request-latency"), Clock(seconds=700, why="a few minutes"),
        Clock(seconds=700, why="a few minutes"),
        Clock(seconds=34560, why="well within the retention"), Clock(seconds=700)]
    tidy = tidied(story)
    assert tidy == [FaultOn(fault="response-cut"), charge, FaultOff(fault="response-cut"),
                    FaultOn(fault="request-latency"), Clock(
                        seconds=36660, why="a few minutes + a few minutes + well within the "
                                           "retention")]
    assert tidied(tidy) == tidy
    # A fault healed only after something ran under it stays, as do jumps apart.
    apart: list[Action] = [FaultOn(fault="response-cut"), charge, FaultOff(fault="response-cut"),
                           Clock(seconds=5), Retry(id="o1"), Clock(seconds=5)]
    assert tidied(apart) == apart

    steps = tuple(StepRecord(n, "step", "", action, first_event=n - 1, last_event=n)
                  for n, action in enumerate(story, 1))
    finding = Finding(property="P1", key="k", message="m", events=tuple(range(len(story))))
    check = CheckResult({}, [finding], [])
    session, played = _always_breaking(check, "P1")
    best = drop_steps(session, Failure(steps, (), check, ("P1",), None, None, 1),
                      deadline=time.monotonic() - 1)
    assert played == [tidy] and best.operations == 5


def test_the_live_line_shows_the_phase_and_the_example_count() -> None:
    out = io.StringIO()
    console = ConsoleReport(Console(file=out, force_terminal=True, width=120))
    console.handle(ScenarioStarted("explore", 0, 1))
    console.handle(Progress("explore", "shrinking", 12))
    outcome = outcome_of(None, doubt=None, seconds=1.0, story_path=None)
    console.handle(ScenarioFinished(outcome, None))  # type: ignore[arg-type]
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "explore · shrinking · example 12 · 0 requests" in plain


def test_a_passing_explore_keeps_every_example_and_check_agrees(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    done = explore(ExploreConfig(target=reference_target(store=None, flaw=None),
                                 max_examples=4, seed=3, report_dir=tmp_path,
                                 toxiproxy=toxiproxy_server), [ReportDirectory(tmp_path)])
    assert done.story is None
    results = json.loads((tmp_path / "results.json").read_text())
    numbers = results["extra"]["explore"]
    scenario = results["scenarios"][0]
    # Hypothesis may draw one more than its budget (a replayed database entry, its own
    # bookkeeping): what matters is that every example run is counted and kept.
    assert numbers["examples"] >= 4 and numbers["steps"] >= numbers["examples"]
    assert scenario["requests"] == numbers["requests"] > 0
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert len(history) == scenario["events"] > 0
    assert [e["index"] for e in history] == list(range(len(history)))
    times = [e["time"] for e in history]
    assert times == sorted(times)  # one timeline across the examples
    assert "requests" in (tmp_path / "index.html").read_text()
    judged = subprocess.run([sys.executable, "-m", "harness.cli", "check", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert judged.returncode == 0, judged.stdout + judged.stderr


def test_a_passing_replay_keeps_its_history(toxiproxy_server: ToxiproxyServer,
                                            tmp_path: Path) -> None:
    key = KeyPlan(name="k1", shape="plain")
    story = hand_written(NewRequest(id="o1", tenant="a", key=key, body=BODY), Retry(id="o1"))
    done = replay(story, ReplayConfig(target=reference_target(store=None, flaw=None),
                                      report_dir=tmp_path, toxiproxy=toxiproxy_server),
                  [ReportDirectory(tmp_path)])
    assert done.result.verdict == "pass"
    scenario = json.loads((tmp_path / "results.json").read_text())["scenarios"][0]
    assert scenario["requests"] >= 2 and scenario["events"] > 0

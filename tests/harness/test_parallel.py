"""Scenarios at once (issue 17 part 2): the same verdicts as one after another, on the correct
reference server and on two flaws; reports in the order of the plan; a scenario that changes
the whole target without saying so is refused in a lane, never judged beside the others."""

from __future__ import annotations

import random
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness._interrupts import Interrupted, interrupt_on_signals, interruption_handled
from harness._outcomes import ScenarioOutcome
from harness._runner import RunConfig, run_scenarios
from harness._scenario import Scenario
from harness.http._context import ScenarioContext
from harness.http._deployment import Deployment
from harness.http._parallel import OwnInstances, needs_whole_target, run_at_once
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from scenarios import CATALOG
from tests.reference_server.support import wait_until

#: Shared-target scenarios (network faults on their own proxies, a reuse) and two that need the
#: whole target (a second process, a crash), on instances of their own: short, and each flaw
#: below is caught by one of them.
CHOSEN = ["timeout-after-commit", "concurrent-retries", "key-reuse", "crash-mid-request"]


def verdicts(flaw: str | None, jobs: int, toxiproxy: ToxiproxyServer,
             report_dir: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    target = reference_target(store=None, flaw=flaw)
    result = run_scenarios(RunConfig(
        target=target, scenarios=[CATALOG[n] for n in CHOSEN], report_dir=report_dir, seed=7,
        toxiproxy=toxiproxy, jobs=jobs, own_target=lambda scenario: target))
    assert result.complete
    return [(o.name, o.verdict, tuple(sorted({f.property for f in o.findings})))
            for o in result.outcomes]


@pytest.mark.parametrize("flaw", [None, "no-body-hash", "check-then-insert"])
def test_scenarios_at_once_reach_the_verdicts_of_a_serial_run(
        flaw: str | None, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    serial = verdicts(flaw, 1, toxiproxy_server, tmp_path / "serial")
    at_once = verdicts(flaw, 4, toxiproxy_server, tmp_path / "at-once")
    assert at_once == serial  # in the plan's order too
    assert [name for name, _, _ in at_once] == CHOSEN
    if flaw is None:
        assert {verdict for _, verdict, _ in serial} == {"pass"}
    else:
        assert any(verdict == "fail" for _, verdict, _ in serial)


def test_what_needs_the_whole_target_is_known_from_needs_and_uses() -> None:
    target = reference_target(store=None, flaw=None)
    whole = {name for name, s in CATALOG.items() if needs_whole_target(s, target)}
    assert {"crash-mid-request", "zombie-original", "store-outage", "cut-after-commit",
            "late-retry", "bounded-storage", "in-flight-retry", "concurrent-retries"} <= whole
    assert not whole & {"timeout-after-commit", "key-reuse", "missing-key", "bad-input",
                        "tenant-collision", "distinct-keys", "handler-error"}


def _moves_the_clock(context: ScenarioContext) -> None:
    context.send(context.request(context.new_key()))
    context.advance_clock(60)


def test_a_lane_refuses_to_move_the_clock_of_a_shared_target(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    sneaky = Scenario(name="sneaky", summary="", story="", properties=("P1",), plan=(),
                      run=_moves_the_clock)  # declares neither needs nor uses
    result = run_scenarios(RunConfig(
        target=reference_target(store=None, flaw=None),
        scenarios=[sneaky, CATALOG["key-reuse"]], report_dir=tmp_path, seed=1,
        toxiproxy=toxiproxy_server, jobs=2))
    outcome = result.outcomes[0]
    assert outcome.verdict == "unknown"
    assert "move the target's clock" in (outcome.reason or "")
    assert "declare it" in (outcome.reason or "")
    assert result.outcomes[1].verdict == "pass"


def test_an_own_instance_serves_one_scenario_at_a_time_and_is_reused(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    target = reference_target(store=None, flaw=None)
    with OwnInstances(lambda label: target, toxiproxy=toxiproxy_server, workdir=tmp_path,
                      allow_remote=False) as own:
        own.warm_up()
        first, second = own.take(), own.take()  # the warm one, then one started now
        assert first.instances[0].direct_url != second.instances[0].direct_url  # two processes
        own.give_back(second)
        assert own.take() is second  # no third start while one is idle
        processes = [d.instances[0].process for d in (first, second)]
    assert all(p is not None and not p.running() for p in processes)


@pytest.fixture
def interrupts_as_the_cli_does() -> Iterator[None]:
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    interrupt_on_signals()
    try:
        yield
    finally:
        interruption_handled()  # the run this test stands in for has obeyed the signal
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@pytest.mark.usefixtures("interrupts_as_the_cli_does")
def test_a_scenario_ending_after_an_interrupt_is_never_reported_finished(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """Ctrl-C while a scenario runs, caught by the scenario's own thread (the kernel may hand
    it to any): the run stops at once, and the scenario, ending after that as one does while
    its target is torn down, is not reported finished (its outcome is not a verdict)."""
    interrupted = threading.Event()
    heard: list[int] = []

    def ctrl_c_then_end(scenario: Scenario, lane: Deployment,
                        rng: random.Random) -> ScenarioOutcome:
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        interrupted.wait(timeout=10)  # ends anyway, so a run that never stops is seen to fail
        return ScenarioOutcome(scenario.name, "pass", scenario.properties)

    target = reference_target(store=None, flaw=None)
    with Deployment(target, toxiproxy=toxiproxy_server, workdir=tmp_path) as deployment:
        with pytest.raises(Interrupted):
            run_at_once([CATALOG["key-reuse"]], deployment, jobs=2, seed=1, own=None,
                        run_one=ctrl_c_then_end, started=lambda position: None,
                        finished=lambda position, outcome: heard.append(position))
        interrupted.set()  # before the scenario ended
        wait_until(lambda: not any(t.name.startswith("scenario_")
                                   for t in threading.enumerate()),
                   "the scenario's thread to end")
    assert heard == []

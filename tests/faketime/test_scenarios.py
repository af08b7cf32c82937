"""The clock-needing scenarios, run through the ordinary runner against targets with no clock
hook: late-retry and bounded-storage apply when libfaketime moves the clock, find the flaws that
only a moved clock shows, and are n/a with the reason when the target ignores LD_PRELOAD."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness._outcomes import RunResult, ScenarioOutcome
from harness._runner import RunConfig, run_scenarios
from harness._scenario import Scenario
from harness._target import Target
from harness.services._toxiproxy import ToxiproxyServer
from scenarios import CATALOG

CLOCKED = (CATALOG["late-retry"], CATALOG["bounded-storage"])


def run(target: Target, toxiproxy: ToxiproxyServer, report: Path,
        scenarios: tuple[Scenario, ...] = CLOCKED) -> dict[str, ScenarioOutcome]:
    result: RunResult = run_scenarios(RunConfig(target=target, scenarios=scenarios, seed=5,
                                                report_dir=report, toxiproxy=toxiproxy))
    assert result.complete
    return {o.name: o for o in result.outcomes}


def findings(outcome: ScenarioOutcome) -> list[str]:
    return [f"{f.property}: {f.message}" for f in outcome.findings]


@pytest.mark.parametrize("which", ["python_target", "node_target"])
def test_late_retry_and_bounded_storage_run_with_no_clock_hook(
        which: str, request: pytest.FixtureRequest, toxiproxy_server: ToxiproxyServer,
        tmp_path: Path) -> None:
    target: Target = request.getfixturevalue(which)
    assert target.hooks.clock is None
    outcomes = run(target, toxiproxy_server, tmp_path)
    for outcome in outcomes.values():
        assert outcome.verdict == "pass", findings(outcome)
        jumps = [e for e in outcome.events if e.f == "clock"]
        assert jumps and all(e.value["via"] == "libfaketime" for e in jumps)
    measured = [n for n in outcomes["late-retry"].notes if n.property == "P6"]
    assert measured, "late-retry measured no retention"
    kept, forgotten = measured[0].data["kept_at_least"], measured[0].data["forgotten_by"]
    assert 86400 - 120 <= kept <= 86400 <= forgotten <= 86400 + 120  # 24 h, to the minute
    sizes = [int(e.value["rows"]) for e in outcomes["bounded-storage"].events
             if e.f == "store-size"]
    assert sizes and max(sizes) <= 8  # two half-days of four keys, never more


def test_a_retention_shorter_than_promised_is_found(
        node_target: Target, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    outcomes = run(node_target.with_start_args(["3600"]), toxiproxy_server, tmp_path,
                   CLOCKED[:1])
    assert "P6" in {f.property for f in outcomes["late-retry"].findings}


def test_keys_that_never_expire_are_found(
        python_target: Target, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    outcomes = run(python_target.with_start_args(["--ttl", "0"]), toxiproxy_server, tmp_path,
                   CLOCKED[1:])
    assert "P11" in {f.property for f in outcomes["bounded-storage"].findings}


def test_a_static_binary_gets_the_reason_never_a_pass(
        static_target: Target, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    outcomes = run(static_target, toxiproxy_server, tmp_path)
    for outcome in outcomes.values():
        assert outcome.verdict == "n/a"
        assert outcome.reason is not None
        assert "did not move" in outcome.reason and "LD_PRELOAD" in outcome.reason
        assert not outcome.events

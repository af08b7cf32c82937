"""The runner notices a target process that exited by itself, against the real reference
server: its exit is recorded with the return code, then it is started again; a crash the
harness causes is not such an exit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harness import RunConfig, Scenario, ScenarioContext, run_scenarios
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from tests.scenarios.deployed import wait_until_ended


def dies_by_itself(ctx: ScenarioContext) -> None:
    """The crash header, sent as an ordinary request: to the runner the process just ends."""
    request = ctx.request(ctx.new_key(), label="original")
    ctx.send(replace(request, headers={"X-Test-Fault": "crash-after-claim"}))
    wait_until_ended(ctx.deployment)  # left for the next step to notice, not taken here
    ctx.retry_until_answer(ctx.request(ctx.new_key(), label="control"), first_attempt=1)


def crashed_by_the_harness(ctx: ScenarioContext) -> None:
    ctx.crash_during(ctx.request(ctx.new_key(), label="crash"), "after-claim")
    ctx.retry_until_answer(ctx.request(ctx.new_key(), label="control"), first_attempt=1)


def test_an_exit_is_recorded_and_a_harness_crash_is_not(toxiproxy_server: ToxiproxyServer,
                                                        tmp_path: Path) -> None:
    scenarios = [Scenario("dies", "", "", ("P10",), (), run=dies_by_itself),
                 Scenario("crashed", "", "", (), (), run=crashed_by_the_harness)]
    result = run_scenarios(RunConfig(reference_target(store=None, flaw=None), scenarios,
                                     report_dir=tmp_path, seed=1, toxiproxy=toxiproxy_server))
    dies, crashed = result.outcomes
    [exit_event] = [e for e in dies.events if e.f == "exit"]
    assert exit_event.value == {"instance": 0, "code": 137, "scenario": "dies"}
    control = [e for e in dies.events if e.label == "control" and e.type != "invoke"]
    assert control[-1].status == 201 and exit_event.time < control[-1].time
    assert not [e for e in crashed.events if e.f == "exit"]
    assert [e for e in crashed.events if e.f == "crash"]

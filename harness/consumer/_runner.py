"""The runner for a consumer target: broker, proxies and consumers, each scenario, the judge.

The broker, Toxiproxy and the consumers, then each scenario, then the same judge and the same
run events as an HTTP run, so every report works unchanged.

``harness._runner.run_scenarios`` hands a ``ConsumerTarget`` here, through the consumer's front
end (``_front.py``); nothing else differs for the faces (``run``, ``matrix``, the pytest
plugin).
"""

from __future__ import annotations

import random
import shutil
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path

from harness._errors import HarnessError
from harness._history import History
from harness._interrupts import Interrupted, interruption_handled
from harness._outcomes import (
    Handler,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    ScenarioFinished,
    ScenarioOutcome,
    ScenarioStarted,
    Step,
)
from harness._runner import RunConfig, judge, run_scenarios
from harness._scenario import Scenario
from harness.consumer._brokers import broker_for, shared_broker
from harness.consumer._context import ConsumerContext
from harness.consumer._deployment import ConsumerDeployment
from harness.consumer._scenario import ConsumerScenario, http_only
from harness.consumer._target import ConsumerTarget
from harness.judging._findings import merge_verdicts
from harness.services._paths import state_dir
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy

__all__ = ["broker_for", "deployed", "run_consumer_scenarios", "run_target", "shared_broker"]


@contextmanager
def deployed(target: ConsumerTarget, *, toxiproxy: ToxiproxyServer, workdir: Path,
             allow_remote: bool) -> Iterator[ConsumerDeployment]:
    """The consumers ``target`` describes, each behind its own proxy on ``toxiproxy``, on the
    broker ``broker_for`` gives: what a run, an exploration and a replay deploy alike."""
    with broker_for(target, toxiproxy=toxiproxy) as broker, ConsumerDeployment(
            target, toxiproxy=toxiproxy, broker=broker, workdir=workdir,
            allow_remote=allow_remote) as deployment:
        yield deployment


def run_consumer_scenarios(config: RunConfig, handlers: Sequence[Handler] = ()) -> RunResult:
    target = config.target
    assert isinstance(target, ConsumerTarget)
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**32)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    planned = tuple(s.name for s in config.scenarios)

    def emit(event: RunEvent) -> None:
        for handler in handlers:
            handler.handle(event)

    def result(outcomes: list[ScenarioOutcome], *, complete: bool,
               stopped_by: str | None = None) -> RunResult:
        return RunResult(target, tuple(outcomes), seed, started_at, config.report_dir,
                         config.retry_horizon, time.monotonic() - clock, complete,
                         planned=planned, stopped_by=stopped_by)

    emit(RunStarted(target, planned, seed, config.report_dir))
    workdir = (config.report_dir or state_dir() / "runs" / started_at.replace(":", "")) / "target"
    shutil.rmtree(workdir, ignore_errors=True)
    outcomes: list[ScenarioOutcome] = []
    runnable = [s for s in config.scenarios if _reason(s, target) is None]
    try:
        for scenario in [s for s in config.scenarios if s not in runnable]:
            outcomes.append(ScenarioOutcome(scenario.name, "n/a", scenario.properties,
                                            reason=_reason(scenario, target)))
        if runnable:
            toxiproxy_context = (nullcontext(config.toxiproxy) if config.toxiproxy is not None
                                 else start_toxiproxy(log_dir=workdir))
            with toxiproxy_context as toxiproxy, deployed(
                    target, toxiproxy=toxiproxy, workdir=workdir,
                    allow_remote=config.allow_remote) as deployment:
                lost = ({"clock": deployment.clock_unconfirmed} if deployment.clock is None
                        and deployment.clock_unconfirmed else {})
                for scenario in runnable:
                    assert isinstance(scenario, ConsumerScenario)
                    if config.stop is not None:
                        config.stop.check()
                    reason = scenario.not_applicable(deployment.target, unavailable=lost)
                    if reason is not None:  # the clock from outside did not move the consumer
                        outcomes.append(ScenarioOutcome(scenario.name, "n/a",
                                                        scenario.properties, reason=reason))
                        continue
                    emit(ScenarioStarted(scenario.name, planned.index(scenario.name),
                                         len(planned)))
                    outcome = _run_one(scenario, deployment,
                                       random.Random(f"{seed}:{scenario.name}"), config, emit)
                    outcomes.append(outcome)
                    emit(ScenarioFinished(outcome, result(_in_order(outcomes, planned),
                                                          complete=False)))
    except Interrupted as stop:
        interruption_handled()
        final = result(_in_order(outcomes, planned), complete=False,
                       stopped_by=stop.signal_name)
        emit(RunFinished(final))
        return final
    final = result(_in_order(outcomes, planned), complete=True)
    emit(RunFinished(final))
    return final


def _reason(scenario: Scenario, target: ConsumerTarget) -> str | None:
    return (scenario.not_applicable(target) if isinstance(scenario, ConsumerScenario)
            else http_only(target))


def _in_order(outcomes: list[ScenarioOutcome], planned: tuple[str, ...]) -> list[ScenarioOutcome]:
    return sorted(outcomes, key=lambda o: planned.index(o.name))


def _run_one(scenario: ConsumerScenario, deployment: ConsumerDeployment, rng: random.Random,
             config: RunConfig, emit: Callable[[RunEvent], None]) -> ScenarioOutcome:
    started = time.monotonic()
    history = History()
    history.subscribe(lambda event: emit(Step(scenario.name, event)))
    context = ConsumerContext(scenario_name=scenario.name, deployment=deployment,
                              history=history, rng=rng)
    error = None
    try:
        scenario.drive(context)
    except HarnessError as exc:
        error = f"the scenario could not finish: {exc}"
    except Exception as exc:  # a generator bug: report it, judge what was recorded, go on
        error = "the scenario crashed: " + "".join(traceback.format_exception_only(exc)).strip()
    finally:
        context.nemesis.heal_all()
        context.notice_exits()
    try:
        if not any(e.f == "drain" for e in history.events()):
            context.drain()
        context.collect_effects()
    except HarnessError as exc:
        error = error or f"the queue could not be drained: {exc}"
    check = judge(history.events(), deployment.target, config.retry_horizon,
                  base_url=deployment.admin_url(),
                  scripts=(config.report_dir, scenario.name) if config.report_dir else None)
    verdict = check.verdict if error is None else merge_verdicts([check.verdict, "unknown"])
    return ScenarioOutcome(scenario.name, verdict, scenario.properties, check, error,
                           history.events(), time.monotonic() - started)


def run_target(config: RunConfig, handlers: Sequence[Handler] = ()) -> RunResult:
    """Run ``config`` against its target, whatever its kind: the engine's ``run_scenarios``,
    under the name callers used when only this module could run either kind."""
    return run_scenarios(config, handlers)

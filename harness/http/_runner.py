"""An HTTP service's run: deploy it, run scenarios, collect effects, judge, tell the handlers.

Start what the target file asks for, send one plain request, run the scenarios (one after
another, or several at once through ``_parallel``), collect effects, judge, and tell the
handlers at every step.  Jepsen's ``run-case!`` then ``analyze!``; the engine's
``harness._runner.run_scenarios`` hands an HTTP service's run here."""

from __future__ import annotations

import random
import shutil
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack, nullcontext, suppress
from datetime import UTC, datetime
from pathlib import Path

from harness._errors import HarnessError, ReportNotWritten, ServiceError
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
from harness._runner import RunConfig, judge
from harness._scenario import NotApplicable, Scenario
from harness._target import render_template
from harness.http._client import RecordingClient, Request
from harness.http._context import ScenarioContext
from harness.http._deployment import Deployment
from harness.http._parallel import OwnInstances, run_at_once, whole_target_scenarios
from harness.judging._findings import merge_verdicts
from harness.services._paths import state_dir
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy

__all__ = ["run_http_scenarios"]

def run_http_scenarios(config: RunConfig, handlers: Sequence[Handler] = ()) -> RunResult:
    """Run every scenario against one deployment of an HTTP service and return the judged
    result."""
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**32)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()

    emitting = threading.RLock()  # scenarios run at once: handlers hear one event at a time
    over = threading.Event()

    def emit(event: RunEvent) -> None:
        with emitting:
            if over.is_set():  # a scenario thread still ending after an interrupt: the run
                return         # has said its last word, which a late event must not undo
            for handler in handlers:
                handler.handle(event)
            if isinstance(event, RunFinished):
                over.set()

    planned = tuple(s.name for s in config.scenarios)

    def result(outcomes: list[ScenarioOutcome], *, complete: bool,
               stopped_by: str | None = None) -> RunResult:
        return RunResult(config.target, tuple(outcomes), seed, started_at, config.report_dir,
                         config.retry_horizon, time.monotonic() - clock, complete,
                         planned=planned, stopped_by=stopped_by)

    workdir = (config.report_dir or state_dir() / "runs" / started_at.replace(":", "")) / "target"
    report_dir_existed = workdir.parent.exists()
    shutil.rmtree(workdir, ignore_errors=True)  # the last run's store and logs: start afresh
    began = False
    outcomes: list[ScenarioOutcome] = []
    toxiproxy_context = (nullcontext(config.toxiproxy) if config.toxiproxy is not None
                         else start_toxiproxy(log_dir=workdir))
    try:
        with ExitStack() as stack:
            toxiproxy = stack.enter_context(toxiproxy_context)
            own = _own_instances(config, toxiproxy, workdir)
            if own is not None:
                stack.enter_context(own)
                own.warm_up()  # while the shared target starts
            deployment = stack.enter_context(Deployment(
                config.target, toxiproxy=toxiproxy, workdir=workdir,
                instances=config.instances, allow_remote=config.allow_remote))
            if getattr(config.target, "kind", "http") == "http":
                _first_plain_request(deployment)
            # The banner only once the target is up: a target refused at start prints its
            # reason alone, as a bad target file does.
            emit(RunStarted(config.target, planned, seed, config.report_dir))
            began = True
            if config.jobs > 1 and type(deployment) is Deployment:  # not a consumer's
                order = {name: n for n, name in enumerate(planned)}

                def finished(position: int, outcome: ScenarioOutcome) -> None:
                    outcomes.append(outcome)
                    outcomes.sort(key=lambda o: order[o.name])  # reports follow the plan
                    emit(ScenarioFinished(outcome, result(outcomes, complete=False)))

                run_at_once(config.scenarios, deployment, jobs=config.jobs, seed=seed, own=own,
                            run_one=lambda s, d, rng: _run_one(s, d, rng, config, emit),
                            started=lambda n: emit(ScenarioStarted(planned[n], n, len(planned))),
                            finished=finished, stop=config.stop)
            else:
                for position, scenario in enumerate(config.scenarios):
                    if config.stop is not None:
                        config.stop.check()
                    emit(ScenarioStarted(scenario.name, position, len(config.scenarios)))
                    outcome = _run_one(scenario, deployment,
                                       random.Random(f"{seed}:{scenario.name}"), config, emit)
                    outcomes.append(outcome)
                    emit(ScenarioFinished(outcome, result(outcomes, complete=False)))
    except Interrupted as stop:  # the children are stopped; say what finished, as incomplete
        interruption_handled()
        final = result(outcomes, complete=False, stopped_by=stop.signal_name)
        emit(RunFinished(final))
        return final
    except ReportNotWritten:  # a full disk: what the run made there goes too
        _forget(workdir, keep_parent=report_dir_existed)
        raise
    except HarnessError:
        if not began:  # refused at start: leave nothing behind, as a refused target file does
            _forget(workdir, keep_parent=report_dir_existed)
        raise
    final = result(outcomes, complete=True)
    emit(RunFinished(final))
    return final


#: Answers that say "try again later", to the first plain request: sent again, a little later.
_TRY_LATER = (429, 503)
FIRST_REQUEST_TRIES = 3


def _first_plain_request(deployment: Deployment) -> None:
    """One plain request (the keyed operation with a fresh key and body) before any scenario:
    a target that does not accept it (a 404 or 405 from a route it does not have, a 501 from
    another service, a 400 for a body it refuses) would only fill every scenario with
    unknowns and false findings, for minutes.  Such a run is refused at once, with the answer.
    Its history is no scenario's: it judges nothing."""
    target = deployment.target
    marker = uuid.uuid4().hex[:8]
    body = render_template(target.endpoint.body, {
        "amount": 4242, "nonce": marker, "customer": f"cus_{marker[:4]}"})
    request = Request(key=f"first-{marker}",
                      tenant=f"first-{marker}" if target.tenant is not None else None,
                      body=body, label="first plain request")
    client = RecordingClient(target, History(), [deployment.instances[0].url])
    try:
        for attempt in range(1, FIRST_REQUEST_TRIES + 1):
            answer = client.send(request, process="first", attempt=attempt)
            if answer.status not in _TRY_LATER or attempt == FIRST_REQUEST_TRIES:
                break
            time.sleep(1.0)
    finally:
        client.close()
    if answer.status is not None and 200 <= answer.status < 300:
        return
    endpoint = target.endpoint
    got = (f"{answer.status} {(answer.body or '')[:200]!r}" if answer.status is not None
           else f"no answer ({answer.error})")
    raise ServiceError(
        f"the target's first plain request ({endpoint.method} {endpoint.path} with a fresh key) "
        f"got {got}: every scenario sends this request, so nothing could be judged\n"
        f"  fix: check `url` (or [start]) and [endpoint] (method, path, body"
        + (", the [tenant] header" if target.tenant is not None else "")
        + f") in {target.source or 'the target file'}: the service must accept it with a 2xx")


def _own_instances(config: RunConfig, toxiproxy: ToxiproxyServer,
                   workdir: Path) -> OwnInstances | None:
    """Instances for the scenarios that need the whole target, when they run beside others
    and the caller can give each a store of its own."""
    if (config.jobs <= 1 or config.own_target is None
            or not whole_target_scenarios(config.scenarios, config.target)):
        return None
    return OwnInstances(config.own_target, toxiproxy=toxiproxy, workdir=workdir,
                        allow_remote=config.allow_remote)


def _forget(workdir: Path, *, keep_parent: bool) -> None:
    shutil.rmtree(workdir, ignore_errors=True)
    if not keep_parent:
        with suppress(OSError):  # only when empty: never a file the user put there
            workdir.parent.rmdir()


def _run_one(scenario: Scenario, deployment: Deployment, rng: random.Random, config: RunConfig,
             emit: Callable[[RunEvent], None]) -> ScenarioOutcome:
    target = deployment.target
    reason = scenario.not_applicable(target, unavailable=deployment.missing)
    if reason:
        return ScenarioOutcome(scenario.name, "n/a", scenario.properties, reason=reason)
    started = time.monotonic()
    deployment.restart_dead_instances()
    history = History()
    history.subscribe(lambda event: emit(Step(scenario.name, event)))
    context = ScenarioContext(scenario=scenario, deployment=deployment, history=history, rng=rng)
    error = None
    not_applicable = None
    try:
        scenario.run(context)
    except NotApplicable as exc:
        not_applicable = str(exc)
    except HarnessError as exc:
        error = f"the scenario could not finish: {exc}"
    except Exception as exc:  # a generator bug: report it, judge what was recorded, go on
        error = "the scenario crashed: " + "".join(traceback.format_exception_only(exc)).strip()
    finally:
        context.nemesis.heal_all()
        context.notice_exits()  # a process that ended by itself is a finding: record it first
        deployment.restart_dead_instances()
    if not_applicable is not None:  # nothing it exercised is judged: n/a says why
        context.client.close()
        return ScenarioOutcome(scenario.name, "n/a", scenario.properties, reason=not_applicable,
                               events=history.events(), seconds=time.monotonic() - started)
    context.collect_effects()
    context.client.close()
    check = judge(history.events(), target, config.retry_horizon,
                  base_url=deployment.instances[0].direct_url,
                  scripts=(config.report_dir, scenario.name) if config.report_dir else None)
    verdict = check.verdict if error is None else merge_verdicts([check.verdict, "unknown"])
    return ScenarioOutcome(scenario.name, verdict, scenario.properties, check, error,
                           history.events(), time.monotonic() - started)

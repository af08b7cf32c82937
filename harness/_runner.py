"""The runner's part that every front end shares: a run's settings, and the judge.

``run_scenarios`` runs a ``RunConfig`` against its target, whatever its kind: the target's
front end (``harness._front``) deploys it, plays the scenarios and calls ``judge`` on each
history.  ``judge`` checks one history and attaches to each finding how to reproduce it.
Jepsen's ``run-case!`` then ``analyze!``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from harness._front import front_for
from harness._history import Event
from harness._interrupts import StopRequest
from harness._outcomes import Handler, RunResult
from harness._scenario import Scenario
from harness._target import Target
from harness.judging._checker import CheckOptions, CheckResult, PropertyResult, check_history
from harness.judging._findings import Finding
from harness.reproduction._scripts import script_path
from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["DEFAULT_RETRY_HORIZON", "RunConfig", "default_jobs", "judge", "run_scenarios"]

DEFAULT_RETRY_HORIZON = 86400.0


@dataclass(frozen=True)
class RunConfig:
    target: Target
    scenarios: Sequence[Scenario]
    report_dir: Path | None = None
    seed: int | None = None
    allow_remote: bool = False
    retry_horizon: float = DEFAULT_RETRY_HORIZON
    instances: int = 1
    toxiproxy: ToxiproxyServer | None = None  # shared with other runs; started when None
    #: Scenarios at once (``_parallel``); 1 plays them one after another.
    jobs: int = 1
    #: A target with a store of its own, for a scenario that needs the whole target to run on
    #: beside the others; None: such scenarios run alone after the others.
    own_target: Callable[[str], Target] | None = None
    #: How a run in a worker thread hears of Ctrl-C (see ``StopRequest``); None: the run is in
    #: the main thread, where the signal itself raises.
    stop: StopRequest | None = None


def run_scenarios(config: RunConfig, handlers: Sequence[Handler] = ()) -> RunResult:
    """Run every scenario of ``config`` against its target, whatever its kind, and return the
    judged result: the target's front end deploys it and plays them (``Front.run``)."""
    return front_for(config.target).run(config, handlers)


def default_jobs() -> int:
    """Scenarios at once by default: twice the cores (a scenario mostly waits on the network
    and on its target), at most 8."""
    return max(1, min(8, 2 * (os.cpu_count() or 1)))


def _script_of(finding: Finding) -> tuple[object, ...]:
    """Which reproduction a finding shares: one per key (its findings have one story), one
    each for findings without a key."""
    if finding.key is not None:
        return ("key", finding.key)
    return (finding.property, finding.key, finding.message, finding.events)


def judge(events: Sequence[Event], target: Target, retry_horizon: float, *,
          base_url: str, properties: Sequence[str] | None = None,
          scripts: tuple[Path, str] | None = None) -> CheckResult:
    """Check one history (against ``properties``, default all) and attach a reproduction to
    each finding: with ``scripts`` (the report directory and the scenario), the command that
    runs the script of the finding's key there (the report writes it); else its front end's line
    that works while the target still runs (an HTTP service's: the ``curl`` of its last
    request), if any."""
    check = check_history(events, CheckOptions.for_target(target, retry_horizon),
                          properties=properties)
    by_index = {e.index: e for e in events}
    front = front_for(target)
    numbers: dict[tuple[object, ...], int] = {}

    def with_line(finding: Finding) -> Finding:
        if scripts is not None:
            directory, scenario = scripts
            number = numbers.setdefault(_script_of(finding), len(numbers) + 1)
            script = directory / script_path(scenario, number)
            return replace(finding, reproduce=shlex.join(["bash", str(script)]))
        line = front.reproduce_line(finding, by_index, target, base_url)
        return finding if line is None else replace(finding, reproduce=line)

    results = {
        pid: PropertyResult(r.property, r.verdict, tuple(with_line(f) for f in r.findings),
                            r.notes, r.reason)
        for pid, r in check.results.items()
    }
    return replace(check, results=results, findings=[with_line(f) for f in check.findings])

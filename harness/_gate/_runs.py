"""One run of the harness per target in a pytest session, shared by that target's test items.

A run deploys the target once and plays every selected scenario against it in catalog order, as
``idem-harness run`` does (the clock-moving scenarios come last, the target starts once), so the
plugin calls the same runner with the same handlers and writes the same report directory.  The
run happens when the first of its items executes; the others read their outcome from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness._errors import HarnessError
from harness._outcomes import RunResult, ScenarioOutcome
from harness._profiles import Profile
from harness._runner import RunConfig, run_scenarios
from harness._target import Target
from harness.reports import ReportDirectory
from scenarios import CATALOG

__all__ = ["RunFailed", "TargetRun"]


class RunFailed(Exception):
    """The harness could not run the target at all (a missing service, a target that would not
    start); every item of the run reports it."""

    def __init__(self, error: HarnessError) -> None:
        self.error = error
        super().__init__(str(error))


@dataclass
class TargetRun:
    """A target, where its report goes, and (once run) its result or why there is none."""

    target: Target
    report_dir: Path
    profile: Profile
    seed: int | None = None
    explore_examples: int = 0  # the explorer test's budget; 0: no explorer test
    selected: list[str] = field(default_factory=list)
    #: Its items that survived selection, and whether any of them exercised the target (a
    #: scenario that applied, or the explorer): the gate fails a run that kept items and
    #: exercised nothing (``_session.idle``).
    items: int = 0
    exercised: bool = False
    _result: RunResult | None = field(default=None, init=False)
    _error: HarnessError | None = field(default=None, init=False)

    @property
    def result(self) -> RunResult | None:
        return self._result

    @property
    def error(self) -> HarnessError | None:
        """Why the run could not start, if it could not."""
        return self._error

    def outcome(self, scenario: str) -> ScenarioOutcome:
        """The outcome of ``scenario``, running every selected scenario first if nobody has."""
        if self._result is None and self._error is None:
            self._run()
        if self._error is not None:
            raise RunFailed(self._error)
        assert self._result is not None
        return next(o for o in self._result.outcomes if o.name == scenario)

    def _run(self) -> None:
        chosen = [s for name, s in CATALOG.items() if name in self.selected]
        config = RunConfig(target=self.target, scenarios=chosen, report_dir=self.report_dir,
                           seed=self.seed)
        try:
            self._result = run_scenarios(config, [ReportDirectory(self.report_dir)])
        except HarnessError as exc:
            self._error = exc

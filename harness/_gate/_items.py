"""The pytest nodes: one collector per target, one item per scenario.

An item passes when its scenario held, is skipped (with the missing capability as the reason)
when the scenario does not apply to the target, and fails with the findings, each followed by
its shortest story and its ``curl`` line, when the harness found something or could not judge.
Markers make scenarios selectable with ``-m``: see docs/ci.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness._errors import ServiceUnavailable
from harness._gate._exploring import ExploreItem
from harness._gate._runs import RunFailed, TargetRun
from harness._gate._skips import skip_at_item
from harness._gate._story import render_story
from harness._outcomes import ScenarioOutcome
from harness._scenario import Scenario
from scenarios import default_scenarios

__all__ = ["ScenarioFailed", "ScenarioItem", "TargetCollector", "scenario_marker"]


def scenario_marker(name: str) -> str:
    """The per-scenario marker: ``key-reuse`` is selected with ``-m idem_key_reuse``."""
    return "idem_" + name.replace("-", "_")


class ScenarioFailed(Exception):
    """The scenario's verdict was ``fail`` or ``unknown``; the outcome says why."""

    def __init__(self, outcome: ScenarioOutcome) -> None:
        self.outcome = outcome
        super().__init__(f"{outcome.name}: {outcome.verdict}")


class TargetCollector(pytest.Collector):
    """The scenarios of the catalog, as items that share one ``TargetRun``, then the explorer."""

    def __init__(self, *, run: TargetRun, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run

    def collect(self) -> Iterator[pytest.Item]:
        yield from self._scenarios()
        if self.run.explore_examples > 0:
            item = ExploreItem.from_parent(self, name="explore", run=self.run,
                                           examples=self.run.explore_examples)
            item.add_marker(pytest.mark.idem)
            item.add_marker(pytest.mark.idem_target(name=self.run.target.name))
            item.add_marker(pytest.mark.idem_explore)
            yield item

    def _scenarios(self) -> Iterator[ScenarioItem]:
        for scenario in default_scenarios(self.run.target):
            item = ScenarioItem.from_parent(self, name=scenario.name, scenario=scenario)
            item.add_marker(pytest.mark.idem)
            item.add_marker(pytest.mark.idem_target(name=self.run.target.name))
            item.add_marker(pytest.mark.idem_scenario(name=scenario.name))
            item.add_marker(getattr(pytest.mark, scenario_marker(scenario.name)))
            for property_id in scenario.properties:
                item.add_marker(pytest.mark.idem_property(id=property_id))
            reason = scenario.not_applicable(self.run.target)
            if reason:  # the runner will say n/a for the same reason; skip without waiting
                item.add_marker(pytest.mark.skip(reason=f"{scenario.name}: {reason}"))
            yield item


class ScenarioItem(pytest.Item):
    """One scenario against one target; its verdict comes from the target's shared run."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario

    @property
    def run(self) -> TargetRun:
        assert isinstance(self.parent, TargetCollector)
        return self.parent.run

    def runtest(self) -> None:
        try:
            outcome = self.run.outcome(self.scenario.name)
        except RunFailed as failed:
            # Outside CI a missing service skips, saying how to provide it; in CI it fails.
            if isinstance(failed.error, ServiceUnavailable) and not (
                self.run.profile.require_services
            ):
                skip_at_item(str(failed.error))
            raise
        if outcome.verdict == "n/a":
            skip_at_item(f"{outcome.name}: {outcome.reason or 'not applicable to this target'}")
        self.run.exercised = True
        if outcome.verdict in ("fail", "unknown"):
            raise ScenarioFailed(outcome)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        error = excinfo.value
        if isinstance(error, ScenarioFailed):
            return self._explain(error.outcome)
        if isinstance(error, RunFailed):
            return f"idem-harness could not run target {self.run.target.name}:\n{error}"
        return str(super().repr_failure(excinfo, style))

    def _explain(self, outcome: ScenarioOutcome) -> str:
        run, result = self.run, self.run.result
        assert result is not None  # an outcome exists only once the run has a result
        lines = [f"idem-harness: scenario {outcome.name} against {run.target.name}: "
                 f"{outcome.verdict} (seed {result.seed}; report in {run.report_dir})"]
        if outcome.reason:
            lines.append(f"  {outcome.reason}")
        if outcome.check is not None:
            lines += [f"  {pid}: unknown: {r.reason}" for pid, r in outcome.check.results.items()
                      if r.verdict == "unknown" and r.reason]
        for finding in outcome.findings:
            lines += ["", f"{finding.property} {finding.klass} {finding.key or ''}".rstrip(),
                      f"  {finding.message}"]
            story = render_story(finding, outcome.events, run.target)
            if story:
                lines += ["  shortest story:", *(f"    {line}" for line in story.splitlines())]
            if finding.reproduce:
                lines.append(f"  reproduce: {finding.reproduce}")
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Path, int, str]:
        """The target file (line 0: the file as a whole) and a title naming both."""
        return self.path, 0, f"idem-harness {self.run.target.name}: {self.scenario.name}"


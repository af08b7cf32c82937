"""The explorer as one more test per target, failing with the shortest failing story.

Hypothesis draws stories against the target within a budget of examples.

It calls the same ``explore`` as ``idem-harness explore`` and writes the same report (with
``story.json``, replayable by ``idem-harness replay``) to ``<report dir>/explore``, apart from the
scenarios' report of the same target.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness._errors import HarnessError, ServiceUnavailable
from harness._gate._runs import TargetRun
from harness._gate._skips import skip_at_item
from harness.explore import (
    Exploration,
    ExploreConfig,
    explore,
    render_story,
    replay_line,
    story_heading,
)
from harness.reports import ReportDirectory

__all__ = ["ExploreFailed", "ExploreItem"]


class ExploreFailed(Exception):
    """A story failed (or could not be judged); the exploration holds it."""

    def __init__(self, exploration: Exploration) -> None:
        self.exploration = exploration
        super().__init__(f"explore: {exploration.result.verdict}")


class ExploreItem(pytest.Item):
    """``explore`` against one target with ``examples`` examples at most."""

    def __init__(self, *, run: TargetRun, examples: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.run = run
        self.examples = examples

    def runtest(self) -> None:
        report_dir = self.run.report_dir / "explore"
        config = ExploreConfig(target=self.run.target, max_examples=self.examples,
                               seed=self.run.seed, report_dir=report_dir)
        try:
            exploration = explore(config, [ReportDirectory(report_dir)])
        except ServiceUnavailable as exc:
            if not self.run.profile.require_services:
                skip_at_item(str(exc))
            raise
        self.run.exercised = True
        if exploration.result.verdict != "pass":
            raise ExploreFailed(exploration)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str:
        error = excinfo.value
        if isinstance(error, HarnessError):
            return f"idem-harness could not explore target {self.run.target.name}:\n{error}"
        if not isinstance(error, ExploreFailed):
            return str(super().repr_failure(excinfo, style))
        done = error.exploration
        lines = [f"idem-harness: explore against {self.run.target.name}: "
                 f"{done.result.verdict} (seed {done.result.seed}; report in "
                 f"{self.run.report_dir / 'explore'})"]
        for outcome in done.result.outcomes:
            if outcome.reason:
                lines.append(f"  {outcome.reason}")
            lines += [f"{f.property} {f.klass}: {f.message}" for f in outcome.findings]
        for number, (story, path) in enumerate(zip(done.stories, done.story_paths,
                                                       strict=True), 1):
            lines += ["", render_story(story, replay_line=replay_line(path),
                                       heading=story_heading(story, number, len(done.stories)))]
        return "\n".join(lines)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"idem-harness {self.run.target.name}: explore"

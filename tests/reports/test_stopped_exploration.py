"""An exploration stopped by Ctrl-C says incomplete in its row too, never pass beside an
INCOMPLETE verdict (issue 38, item 8): the explorer's one outcome stands for the whole search,
which did not finish."""

from __future__ import annotations

import io

from rich.console import Console

from harness import load_target
from harness._outcomes import RunFinished, RunResult, ScenarioOutcome
from harness.reports import ConsoleReport, render_html


def _exploration(*, stopped: bool, verdict: str = "pass") -> RunResult:
    outcome = ScenarioOutcome("explore", verdict, ("P1",), seconds=3.0)  # type: ignore[arg-type]
    return RunResult(load_target("reference"), (outcome,), 1, "2026-12-01T00:00:00+00:00", None,
                     86400.0, 3.0, not stopped, {"explore": {"examples": 4}},
                     planned=("explore",), stopped_by="SIGINT" if stopped else None)


def _console(result: RunResult) -> str:
    out = io.StringIO()
    ConsoleReport(Console(file=out, width=160), quiet=True).handle(RunFinished(result))
    return out.getvalue()


def _row(text: str) -> str:
    return next(line for line in text.splitlines() if line.strip("│ ").startswith("explore"))


def test_a_stopped_exploration_row_says_incomplete_not_pass() -> None:
    text = _console(_exploration(stopped=True))
    assert "INCOMPLETE" in text
    assert "incomplete" in _row(text) and "pass" not in _row(text), text
    page = render_html(_exploration(stopped=True))
    assert 'class="pill v-incomplete">incomplete<' in page
    assert 'class="pill v-pass">' not in page


def test_a_finished_exploration_row_keeps_its_verdict() -> None:
    assert "pass" in _row(_console(_exploration(stopped=False)))
    assert "fail" in _row(_console(_exploration(stopped=True, verdict="fail")))

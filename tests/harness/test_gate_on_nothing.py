"""A gate never passes on nothing (issue 38, item 7): a scenario named for the other kind of
target is a usage error that names the scenarios that fit, and a run (or a matrix row) in which
nothing was exercised, every scenario n/a, is inconclusive (exit 3), never a pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import load_target
from harness._matrix import Matrix, MatrixCell, MatrixRow, matrix_exit_code, render_matrix_lines
from harness._outcomes import RunResult, ScenarioOutcome
from harness.reports import render_html
from harness.reports._results import render_results
from harness.targets._reference import reference_target

#: Nothing may be reached: a usage error comes before any service starts.
UNREACHABLE = {**os.environ, "TOXIPROXY_URL": "http://127.0.0.1:9"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=60, env=UNREACHABLE)


@pytest.mark.parametrize(("command", "other", "fits"), [
    (["run", "--reference"], "lost-ack", "key-reuse"),
    (["run", "--reference-consumer"], "key-reuse", "lost-ack"),
    (["matrix", "--no-flaws"], "lost-ack", "key-reuse"),
])
def test_a_scenario_of_the_other_kind_is_a_usage_error_naming_those_that_fit(
        tmp_path: Path, command: list[str], other: str, fits: str) -> None:
    done = _cli(*command, "--scenario", other, "--report-dir", str(tmp_path / "r"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{other}" in done.stderr and fits in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()


def _outcome(name: str, verdict: str, reason: str | None = None) -> ScenarioOutcome:
    return ScenarioOutcome(name, verdict, ("P6",), reason=reason)  # type: ignore[arg-type]


def test_a_run_in_which_every_scenario_was_not_applicable_is_inconclusive() -> None:
    result = RunResult(load_target("reference"),
                       (_outcome("late-retry", "n/a", "no clock hook"),
                        _outcome("bounded-storage", "n/a", "no store-size hook")),
                       1, "2026-12-01T00:00:00+00:00", None, 86400.0, 1.0)
    assert (result.verdict, result.exit_code) == ("inconclusive", 3)
    assert '"verdict": "inconclusive"' in render_results(result)
    page = render_html(result)
    assert "INCONCLUSIVE" in page and "nothing was exercised" in page


def test_a_run_with_one_scenario_that_held_beside_the_not_applicable_passes() -> None:
    result = RunResult(load_target("reference"),
                       (_outcome("late-retry", "n/a", "no clock hook"),
                        _outcome("key-reuse", "pass")),
                       1, "2026-12-01T00:00:00+00:00", None, 86400.0, 1.0)
    assert (result.verdict, result.exit_code) == ("pass", 0)


def test_a_matrix_row_that_exercised_nothing_makes_the_matrix_inconclusive() -> None:
    names = ["late-retry", "bounded-storage"]
    empty = MatrixRow("a service without a clock", reference_target(store=None, flaw=None))
    played = MatrixRow("correct (sqlite)", reference_target(store=None, flaw=None), "correct")
    matrix = Matrix(names, [played, empty])
    for name in names:
        matrix.cells[(empty.label, name)] = MatrixCell("n/a", reason="no clock hook")
        matrix.cells[(played.label, name)] = MatrixCell("pass")
    assert matrix.problems() == []
    assert matrix_exit_code(matrix) == 3
    text = render_matrix_lines(matrix)
    assert "a service without a clock" in text and "nothing exercised" in text, text
    matrix.cells[(empty.label, names[0])] = MatrixCell("pass")
    assert matrix_exit_code(matrix) == 0

"""The matrix: many targets (or the reference server with each named flaw) by every scenario.

Each row is an ordinary run with its own report directory; the matrix only tabulates their
verdicts.  Rows run two at a time by default and share one Toxiproxy; within a row, ``jobs``
scenarios run at once (``harness.http._parallel``).  ``on_row`` hears each row as it finishes, and
``render_matrix_lines`` is the table for a terminal: one line per row, within 100 columns.

Ctrl-C stops a matrix as it stops a run: the rows under way stop at their next step (their
threads hear of it through a ``StopRequest``) and report what they finished, rows not begun
never begin, and the matrix says which rows were stopped and which scenarios never ran.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness._front import front_for, fronts
from harness._interrupts import Interrupted, StopRequest, each_as_done, interruption_handled
from harness._outcomes import Handler, RunResult
from harness._runner import RunConfig, run_scenarios
from harness._scenario import Scenario
from harness._target import Target
from harness.services._toxiproxy import start_toxiproxy

__all__ = ["Matrix", "MatrixCell", "MatrixRow", "RowKind", "matrix_exit_code",
           "render_matrix_json", "render_matrix_lines", "render_matrix_markdown",
           "render_row_line", "run_matrix"]

#: The terminal table's width.
WIDTH = 100

RowKind = Literal["target", "flaw", "correct"]


@dataclass(frozen=True)
class MatrixRow:
    """One row: a label, the target it runs, and (for a flaw) the properties it should break."""

    label: str
    target: Target
    kind: RowKind = "target"
    expected: tuple[str, ...] = ()
    #: A target with a store of its own for scenarios that need the whole target (None: they
    #: run alone after the others); see ``RunConfig.own_target``.
    own_target: Callable[[str], Target] | None = None


@dataclass(frozen=True)
class MatrixCell:
    verdict: str
    properties: tuple[str, ...] = ()
    reason: str | None = None

    def text(self, kind: RowKind) -> str:
        if self.verdict == "fail":
            word = "caught" if kind == "flaw" else "finding"
            return f"{word} ({', '.join(self.properties)})"
        if self.verdict == "pass":
            return "held"
        return {"n/a": "not applicable", "not run": "not run"}.get(self.verdict, "unknown")


#: A scenario a stopped matrix never played in a row.
NOT_RUN = MatrixCell("not run", reason="the matrix was stopped before this scenario ran")


@dataclass
class Matrix:
    scenarios: list[str]
    rows: list[MatrixRow]
    cells: dict[tuple[str, str], MatrixCell] = field(default_factory=dict)
    runs: dict[str, RunResult] = field(default_factory=dict)
    #: What stopped the matrix before every row finished (Ctrl-C, SIGTERM); None: it ran out.
    interrupted: Interrupted | None = None

    def finished(self, row: MatrixRow) -> bool:
        """Whether the row played every scenario (a stop left none of them not run)."""
        return not self.not_run(row)

    def not_run(self, row: MatrixRow) -> list[str]:
        """The scenarios a stop kept this row from playing."""
        return [s for s in self.scenarios
                if (cell := self.cells.get((row.label, s))) is not None
                and cell.verdict == NOT_RUN.verdict]

    def exercised_nothing(self, row: MatrixRow) -> bool:
        """Did the row play every scenario, each of them n/a?  A gate must not pass on such a
        row: nothing was tried against its target."""
        return self.finished(row) and all(self.cells[(row.label, s)].verdict == "n/a"
                                          for s in self.scenarios)

    def empty_rows(self) -> list[MatrixRow]:
        """The rows that exercised nothing and are not already a problem (a flaw no scenario
        could catch is one)."""
        return [row for row in self.rows
                if self.exercised_nothing(row) and not self.row_problems(row)]

    def caught(self, row: MatrixRow) -> set[str]:
        """Every property some scenario found broken in this row."""
        return {p for s in self.scenarios for p in self.cells[(row.label, s)].properties}

    def problems(self) -> list[str]:
        """Rows that did not come out as they should: a correct server with a finding, a flaw
        that no scenario caught, or caught without naming the property it breaks."""
        return [p for row in self.rows for p in self.row_problems(row)]

    def row_problems(self, row: MatrixRow) -> list[str]:
        """A finding on a correct server is a problem however far its row got; a flaw not
        caught only once its row has run every scenario."""
        caught = self.caught(row)
        if row.kind == "correct" and caught:
            return [f"{row.label}: the correct server has findings {sorted(caught)}"]
        if row.kind == "flaw" and self.finished(row) and not caught & set(row.expected):
            return [f"{row.label}: no scenario caught it as {', '.join(row.expected)} "
                    f"(found: {', '.join(sorted(caught)) or 'nothing'})"]
        return []


def _cell(result: RunResult, scenario: str) -> MatrixCell:
    outcome = next((o for o in result.outcomes if o.name == scenario), None)
    if outcome is None:
        return NOT_RUN
    properties = tuple(sorted({f.property for f in outcome.findings}, key=lambda p: int(p[1:])))
    return MatrixCell(outcome.verdict, properties, outcome.reason)


def run_matrix(rows: Sequence[MatrixRow], scenarios: Sequence[Scenario], report_dir: Path, *,
               seed: int | None = None, jobs: int = 1, rows_at_once: int = 2,
               handlers_for: dict[str, list[Handler]] | None = None,
               on_row: Callable[[Matrix, MatrixRow], None] | None = None) -> Matrix:
    """Run every row, ``rows_at_once`` at a time and ``jobs`` scenarios at once within each;
    ``on_row`` hears each row as soon as it is done.  Interrupted (in the main thread), it
    stops the rows and returns what they finished, with ``interrupted`` set."""
    matrix = Matrix([s.name for s in scenarios], list(rows))
    present = {front_for(row.target).kind for row in rows}
    stop = StopRequest()
    with start_toxiproxy(log_dir=report_dir) as toxiproxy, ExitStack() as shared:
        for front in fronts():  # what the rows of each kind share (a consumer's one broker)
            if front.kind in present:
                shared.enter_context(front.matrix_services())

        def one(row: MatrixRow) -> RunResult:
            config = RunConfig(target=row.target, scenarios=scenarios,
                               report_dir=report_dir / row.label, seed=seed, toxiproxy=toxiproxy,
                               jobs=jobs, own_target=row.own_target, stop=stop)
            return run_scenarios(config, (handlers_for or {}).get(row.label, []))

        def record(future: Future[RunResult]) -> None:
            row, result = futures[future], future.result()
            matrix.runs[row.label] = result
            for scenario in matrix.scenarios:
                matrix.cells[(row.label, scenario)] = _cell(result, scenario)
            if on_row is not None:
                on_row(matrix, row)

        with ThreadPoolExecutor(max_workers=max(1, rows_at_once),
                                thread_name_prefix="row") as pool:
            futures = {pool.submit(one, row): row for row in rows}
            try:
                each_as_done(set(futures), record)
            except Interrupted as interrupt:
                interruption_handled()
                matrix.interrupted = interrupt
                stop.stop(interrupt)
                pool.shutdown(wait=False, cancel_futures=True)  # rows not begun never begin
                each_as_done({f for f in futures if not f.cancelled()
                               and futures[f].label not in matrix.runs}, record)
    for row in rows:
        for scenario in matrix.scenarios:
            matrix.cells.setdefault((row.label, scenario), NOT_RUN)
    return matrix


def matrix_exit_code(matrix: Matrix) -> int:
    """As ``run`` exits: 1 when a row is not as it should be, 3 (inconclusive) when none is a
    problem but a row exercised nothing (every scenario n/a), else 0.  An interrupted matrix
    exits as its signal does, by raising it again (the command's part)."""
    if matrix.problems():
        return 1
    return 3 if matrix.empty_rows() else 0


def render_row_line(matrix: Matrix, row: MatrixRow) -> str:
    """One row in words, within ``WIDTH`` columns: whether it came out as it should, and the
    scenarios that found something, with the properties each found (then the undecided)."""
    found = [f"{s}: {', '.join(c.properties)}" for s in matrix.scenarios
             for c in [matrix.cells[(row.label, s)]] if c.verdict == "fail"]
    undecided = [s for s in matrix.scenarios if matrix.cells[(row.label, s)].verdict == "unknown"]
    if row.kind == "flaw":
        words = f"expected {', '.join(row.expected)}; " + ("; ".join(found) or "nothing found")
    else:
        words = "; ".join(found) or "no finding"
    if matrix.exercised_nothing(row):
        words = "nothing exercised: every scenario was not applicable"
    if undecided:
        words += f"; unknown: {', '.join(undecided)}"
    not_run = matrix.not_run(row)
    if not_run:
        words += f"; not run: {', '.join(not_run)}"
    mark = ("PROBLEM" if matrix.row_problems(row)
            else "stopped" if not matrix.finished(row)
            else "unknown" if matrix.exercised_nothing(row) else "ok")
    run = matrix.runs.get(row.label)
    head = f"{row.label[:30]:<30} {mark:<7} {run.seconds if run else 0.0:>5.0f}s  "
    return textwrap.fill(words, WIDTH, initial_indent=head, subsequent_indent=" " * len(head),
                         break_on_hyphens=False)


def render_matrix_lines(matrix: Matrix) -> str:
    """The matrix for a terminal: a line per row (``render_row_line``), then the problems."""
    lines = [f"{'row':<30} {'as it':<7} {'time':>6}  scenarios that found something",
             *(render_row_line(matrix, row) for row in matrix.rows)]
    lines += ["", _summary(matrix)]
    lines += [textwrap.fill(p, WIDTH, initial_indent="- ", subsequent_indent="  ")
              for p in matrix.problems()]
    return "\n".join(lines) + "\n"


def _summary(matrix: Matrix) -> str:
    """The line before the problems: whether every row came out as it should, or how far a
    stopped matrix got (its rows cannot all be said to be as expected)."""
    problems = matrix.problems()
    if matrix.interrupted is not None:
        done = sum(matrix.finished(row) for row in matrix.rows)
        return (f"Stopped by {matrix.interrupted.signal_name}: {done} of {len(matrix.rows)} rows "
                "ran every scenario; the others are marked stopped, with the scenarios they "
                "never ran" + (". Problems so far:" if problems else "."))
    if problems:
        return "Problems:"
    empty = matrix.empty_rows()
    if empty:
        return (f"Inconclusive: {len(empty)} row(s) exercised nothing (every scenario was not "
                f"applicable): {', '.join(row.label for row in empty)}.")
    return "All rows as expected."


def render_matrix_markdown(matrix: Matrix) -> str:
    header = ["row", *matrix.scenarios, "expected"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in matrix.rows:
        cells = [matrix.cells[(row.label, s)].text(row.kind) for s in matrix.scenarios]
        expected = ", ".join(row.expected) if row.kind == "flaw" else (
            "no finding" if row.kind == "correct" else "")
        lines.append("| " + " | ".join([row.label, *cells, expected]) + " |")
    lines += ["", _summary(matrix)]
    lines += [f"- {p}" for p in matrix.problems()]
    return "\n".join(lines) + "\n"


def render_matrix_json(matrix: Matrix) -> str:
    data = {
        "scenarios": matrix.scenarios,
        "rows": [
            {
                "label": row.label,
                "kind": row.kind,
                "target": row.target.name,
                "expected": list(row.expected),
                "caught": sorted(matrix.caught(row), key=lambda p: int(p[1:])),
                "finished": matrix.finished(row),
                "cells": {
                    s: {"verdict": c.verdict, "properties": list(c.properties), "reason": c.reason,
                        "text": c.text(row.kind)}
                    for s in matrix.scenarios
                    for c in [matrix.cells[(row.label, s)]]
                },
            }
            for row in matrix.rows
        ],
        "problems": matrix.problems(),
        "stopped_by": None if matrix.interrupted is None else matrix.interrupted.signal_name,
    }
    return json.dumps(data, indent=2) + "\n"

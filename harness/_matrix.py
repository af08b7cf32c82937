"""The matrix: many targets (or the reference server with each named flaw) by every scenario.

Each row is an ordinary run with its own report directory; the matrix only tabulates their
verdicts.  Rows run two at a time by default (this is a 2-core machine) and share one Toxiproxy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from harness._outcomes import Handler, RunResult
from harness._runner import RunConfig, run_scenarios
from harness._scenario import Scenario
from harness._target import Target
from harness._toxiproxy import start_toxiproxy

__all__ = ["Matrix", "MatrixCell", "MatrixRow", "render_matrix_json", "render_matrix_markdown",
           "run_matrix"]

RowKind = Literal["target", "flaw", "correct"]


@dataclass(frozen=True)
class MatrixRow:
    """One row: a label, the target it runs, and (for a flaw) the properties it should break."""

    label: str
    target: Target
    kind: RowKind = "target"
    expected: tuple[str, ...] = ()


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
        return "not applicable" if self.verdict == "n/a" else "unknown"


@dataclass
class Matrix:
    scenarios: list[str]
    rows: list[MatrixRow]
    cells: dict[tuple[str, str], MatrixCell] = field(default_factory=dict)
    runs: dict[str, RunResult] = field(default_factory=dict)

    def caught(self, row: MatrixRow) -> set[str]:
        """Every property some scenario found broken in this row."""
        return {p for s in self.scenarios for p in self.cells[(row.label, s)].properties}

    def problems(self) -> list[str]:
        """Rows that did not come out as they should: a correct server with a finding, a flaw
        that no scenario caught, or caught without naming the property it breaks."""
        found = []
        for row in self.rows:
            caught = self.caught(row)
            if row.kind == "correct" and caught:
                found.append(f"{row.label}: the correct server has findings {sorted(caught)}")
            if row.kind == "flaw" and not caught & set(row.expected):
                found.append(f"{row.label}: no scenario caught it as {', '.join(row.expected)} "
                             f"(found: {', '.join(sorted(caught)) or 'nothing'})")
        return found


def _cell(result: RunResult, scenario: str) -> MatrixCell:
    outcome = next(o for o in result.outcomes if o.name == scenario)
    properties = tuple(sorted({f.property for f in outcome.findings}, key=lambda p: int(p[1:])))
    return MatrixCell(outcome.verdict, properties, outcome.reason)


def run_matrix(rows: Sequence[MatrixRow], scenarios: Sequence[Scenario], report_dir: Path, *,
               seed: int | None = None, jobs: int = 2,
               handlers_for: dict[str, list[Handler]] | None = None) -> Matrix:
    matrix = Matrix([s.name for s in scenarios], list(rows))
    with start_toxiproxy(log_dir=report_dir) as toxiproxy:
        def one(row: MatrixRow) -> RunResult:
            config = RunConfig(target=row.target, scenarios=scenarios,
                               report_dir=report_dir / row.label, seed=seed, toxiproxy=toxiproxy)
            return run_scenarios(config, (handlers_for or {}).get(row.label, []))

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for row, result in zip(rows, pool.map(one, rows), strict=True):
                matrix.runs[row.label] = result
                for scenario in matrix.scenarios:
                    matrix.cells[(row.label, scenario)] = _cell(result, scenario)
    return matrix


def render_matrix_markdown(matrix: Matrix) -> str:
    header = ["row", *matrix.scenarios, "expected"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in matrix.rows:
        cells = [matrix.cells[(row.label, s)].text(row.kind) for s in matrix.scenarios]
        expected = ", ".join(row.expected) if row.kind == "flaw" else (
            "no finding" if row.kind == "correct" else "")
        lines.append("| " + " | ".join([row.label, *cells, expected]) + " |")
    problems = matrix.problems()
    lines += ["", "All rows as expected." if not problems else "Problems:"]
    lines += [f"- {p}" for p in problems]
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
    }
    return json.dumps(data, indent=2) + "\n"

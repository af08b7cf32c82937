"""How long the flaw matrix takes: every row and every scenario, timed in one run.

Goal (issue 5): the whole matrix on SQLite within 3 minutes on a 2-core machine, and a single
scenario within 10 seconds (rows ``--jobs`` at a time, a row's scenarios one after another, so
each scenario's time is its own; bench/parallel.py measures scenarios at once).  Run:
`.venv/bin/python bench/matrix.py [--jobs N]`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness._matrix import MatrixRow, run_matrix
from harness.services._processes import stop_children_on_sigterm
from harness.targets._reference import reference_target
from reference_server.flaws import FLAWS
from scenarios import CATALOG

MATRIX_GOAL = 180.0
SCENARIO_GOAL = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=2, help="rows at once")
    args = parser.parse_args()
    rows = [MatrixRow("correct", reference_target(store=None, flaw=None), "correct")]
    rows += [MatrixRow(name, reference_target(store=None, flaw=name), "flaw", flaw.properties)
             for name, flaw in FLAWS.items()]
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        matrix = run_matrix(rows, list(CATALOG.values()), Path(scratch), seed=1,
                            rows_at_once=args.jobs)
    total = time.monotonic() - started

    names = matrix.scenarios
    print(f"{'row':<24}" + "".join(f"{n[:12]:>13}" for n in names) + f"{'run':>9}")
    slowest = 0.0
    for row in rows:
        run = matrix.runs[row.label]
        seconds = {o.name: o.seconds for o in run.outcomes}
        slowest = max(slowest, *seconds.values())
        print(f"{row.label:<24}" + "".join(f"{seconds[n]:>12.2f}s" for n in names)
              + f"{run.seconds:>8.1f}s")
    print(f"\nwhole matrix ({len(rows)} rows x {len(names)} scenarios, {args.jobs} jobs): "
          f"{total:.1f}s  goal {MATRIX_GOAL:.0f}s  ratio {total / MATRIX_GOAL:.2f}")
    print(f"slowest single scenario: {slowest:.2f}s  goal {SCENARIO_GOAL:.0f}s  "
          f"ratio {slowest / SCENARIO_GOAL:.2f}")
    print(f"problems: {matrix.problems() or 'none'}")


if __name__ == "__main__":
    stop_children_on_sigterm()  # a SIGTERM stops the services it started too
    main()

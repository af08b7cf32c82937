"""``idem-harness matrix``: the reference server, correct and with each named flaw, by every
scenario (and third-party targets beside it)."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import click

from harness._matrix import MatrixRow, render_matrix_json, render_matrix_markdown, run_matrix
from harness._postgres import start_postgres
from harness.cli._common import default_report_dir, translate_errors
from harness.cli._run import reference_target
from harness.reports import write_atomic

__all__ = ["matrix"]


@click.command()
@click.option("--flaw", "flaws", multiple=True, metavar="NAME",
              help="only these flaws (repeatable); default: every named flaw")
@click.option("--no-flaws", is_flag=True, help="only the correct server (and --targets)")
@click.option("--postgres", is_flag=True,
              help="add a row for the correct server on PostgreSQL (IDEM_PG_DSN or a throwaway "
                   "cluster)")
@click.option("--scenario", "scenario_names", multiple=True, metavar="NAME",
              help="only these scenarios (repeatable); default: the whole catalog")
@click.option("--report-dir", type=click.Path(path_type=Path), default=None)
@click.option("--seed", type=int, default=None)
@click.option("--jobs", type=click.IntRange(1, 8), default=2, show_default=True,
              help="rows run at the same time")
@translate_errors
def matrix(flaws: tuple[str, ...], no_flaws: bool, postgres: bool,
           scenario_names: tuple[str, ...], report_dir: Path | None, seed: int | None,
           jobs: int) -> None:
    """Write flaws-by-scenarios as matrix.md and matrix.json; exit 1 if a row is not as it
    should be (a finding on the correct server, a flaw nobody caught)."""
    from reference_server.flaws import FLAWS, get_flaw
    from scenarios import CATALOG, get_scenario

    chosen = [get_scenario(n) for n in scenario_names] or list(CATALOG.values())
    report_dir = report_dir or default_report_dir()
    with ExitStack() as stack:
        rows = [MatrixRow("correct (sqlite)", reference_target(store=None, flaw=None),
                          "correct")]
        if postgres:
            server = stack.enter_context(start_postgres())
            dsn = server.create_database("idem_matrix")
            rows.append(MatrixRow("correct (postgresql)",
                                  reference_target(store=dsn, flaw=None), "correct"))
        if not no_flaws:
            for name in flaws or list(FLAWS):
                flaw = get_flaw(name)
                rows.append(MatrixRow(f"flaw {flaw.name}",
                                      reference_target(store=None, flaw=flaw.name), "flaw",
                                      flaw.properties))
        result = run_matrix(rows, chosen, report_dir, seed=seed, jobs=jobs)
    write_atomic(report_dir / "matrix.md", render_matrix_markdown(result))
    write_atomic(report_dir / "matrix.json", render_matrix_json(result))
    click.echo(render_matrix_markdown(result))
    click.echo(f"matrix written to {report_dir}/matrix.md and matrix.json")
    sys.exit(1 if result.problems() else 0)

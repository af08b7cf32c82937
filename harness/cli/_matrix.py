"""``idem-harness matrix``: targets, or the reference server's flaws, by every scenario.

The reference server, correct and with each named flaw, by every scenario (and third-party
targets beside it)."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import click

from harness._errors import UsageError
from harness._front import front_for, front_named
from harness._matrix import (
    MatrixRow,
    RowKind,
    matrix_exit_code,
    render_matrix_json,
    render_matrix_lines,
    render_matrix_markdown,
    render_row_line,
    run_matrix,
)
from harness._outcomes import Handler
from harness._runner import default_jobs
from harness.cli._common import REPORT_DIR, default_report_dir, translate_errors
from harness.cli._run import jobs_option, own_target
from harness.consumer._matrix import consumer_rows
from harness.reports import ReportDirectory, render_directory_html, write_atomic
from harness.services._postgres import PostgresServer, start_postgres
from harness.targets._loader import load_target
from harness.targets._reference import reference_target

__all__ = ["matrix"]


@click.command()
@click.option("--flaw", "flaws", multiple=True, metavar="NAME",
              help="only these flaws (repeatable); default: every named flaw")
@click.option("--no-flaws", is_flag=True, help="only the correct server (and --targets)")
@click.option("--targets", "target_files", multiple=True, metavar="FILE...",
              help="third-party target files, one row each (kind target) beside the reference "
                   "server; a shell glob works: --targets examples/targets/*.toml")
@click.argument("more_target_files", nargs=-1, metavar="[FILE]...")
@click.option("--postgres", is_flag=True,
              help="add a row for the correct server on PostgreSQL (IDEM_PG_DSN or a throwaway "
                   "cluster)")
@click.option("--scenario", "scenario_names", multiple=True, metavar="NAME",
              help="only these scenarios (repeatable); default: the whole catalog")
@click.option("--report-dir", type=REPORT_DIR, default=None)
@click.option("--seed", type=int, default=None)
@click.option("--consumers", is_flag=True,
              help="add rows for the reference queue consumer, correct and with each named "
                   "consumer flaw (with --postgres, on PostgreSQL too)")
@click.option("--only-consumers", is_flag=True,
              help="only the consumer rows (and --targets): no reference server rows")
@click.option("--rows", "rows_at_once", type=click.IntRange(1, 8), default=2,
              show_default=True, help="rows run at the same time")
@jobs_option
@translate_errors
def matrix(flaws: tuple[str, ...], no_flaws: bool, target_files: tuple[str, ...],
           more_target_files: tuple[str, ...], postgres: bool,
           scenario_names: tuple[str, ...], report_dir: Path | None, seed: int | None,
           consumers: bool, only_consumers: bool, rows_at_once: int, jobs: int | None) -> None:
    """Write rows-by-scenarios as matrix.md and matrix.json; exit 1 if a row is not as it
    should be (a finding on the correct server, a flaw nobody caught).  Findings of third-party
    targets are the matrix's content, not a problem; exit 3 (inconclusive) if none is, but a
    row exercised nothing (every scenario n/a).  A line per row is printed as it finishes."""
    from reference_server.flaws import FLAWS, get_flaw
    from scenarios import CATALOG, get_scenario, unfit_for_every

    chosen = [get_scenario(n) for n in scenario_names] or list(CATALOG.values())
    report_dir = report_dir or default_report_dir()
    targets = [load_target(path) for path in (*target_files, *more_target_files)]
    labels = [t.name for t in targets]
    if len(set(labels)) != len(labels):
        raise UsageError(f"two target files share a name ({', '.join(labels)}); each row needs "
                         "its own: change `name` in one of them")
    with ExitStack() as stack:
        def reference(label: str, kind: RowKind, flaw: str | None = None,
                      expected: tuple[str, ...] = (), server: PostgresServer | None = None,
                      ) -> MatrixRow:
            store = server.create_database("idem_matrix") if server is not None else None
            target = reference_target(store=store, flaw=flaw)
            return MatrixRow(label, target, kind, expected,
                             own_target(target, reference=True, store=store, flaw=flaw,
                                        postgres=server))

        server = stack.enter_context(start_postgres()) if postgres else None
        rows = [] if only_consumers else [reference("correct (sqlite)", "correct")]
        if server is not None and not only_consumers:
            rows.append(reference("correct (postgresql)", "correct", server=server))
        if consumers or only_consumers:
            rows += consumer_rows(flaws=not no_flaws, postgres=server)
        if not no_flaws and not only_consumers:
            for name in flaws or list(FLAWS):
                flaw = get_flaw(name)
                rows.append(reference(f"flaw {flaw.name}", "flaw", flaw.name, flaw.properties))
        rows += [MatrixRow(target.name, target, "target") for target in targets]
        present = {front_for(r.target).kind for r in rows}
        if scenario_names:  # a column no row can play would only say n/a
            unfit_for_every(chosen, http="http" in present, consumers="consumer" in present)
        else:  # the columns some row can play
            chosen = [s for s in chosen if any(front_named(k).fits(s) for k in present)]
        reports: dict[str, list[Handler]] = {
            row.label: [ReportDirectory(report_dir / row.label)] for row in rows}
        click.echo(f"matrix: {len(rows)} rows x {len(chosen)} scenarios, {rows_at_once} rows "
                   f"and {jobs or default_jobs()} scenarios at once; a line per row as it "
                   "finishes", err=True)
        result = run_matrix(rows, chosen, report_dir, seed=seed, jobs=jobs or default_jobs(),
                            rows_at_once=rows_at_once, handlers_for=reports,
                            on_row=lambda m, row: click.echo(render_row_line(m, row), err=True))
    write_atomic(report_dir / "matrix.md", render_matrix_markdown(result))
    write_atomic(report_dir / "matrix.json", render_matrix_json(result))
    write_atomic(report_dir / "index.html", render_directory_html(report_dir))
    click.echo("")
    click.echo(render_matrix_lines(result))
    click.echo(f"matrix written to {report_dir}/matrix.md, matrix.json and index.html")
    if result.interrupted is not None:
        raise result.interrupted  # exits as the signal says, after what finished is written
    sys.exit(matrix_exit_code(result))

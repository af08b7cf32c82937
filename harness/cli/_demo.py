"""``idem-harness demo``: the training demo of each failure mode, for a room of people."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import click
from rich.console import Console

from harness.cli._common import EXIT_FINDINGS, EXIT_PASS, REPORT_DIR, translate_errors

__all__ = ["demo"]


@click.command()
@click.argument("flaw", required=False)
@click.option("--list", "list_modes", is_flag=True, help="list the failure modes, one a line")
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="where to write the report (default reports/demo-FLAW-*)")
@click.option("--seed", type=int, default=None, help="seed for the harness's own choices")
@translate_errors
def demo(flaw: str | None, list_modes: bool, report_dir: Path | None, seed: int | None) -> None:
    """Show FLAW step by step: the scenario that exposes it against the reference server with
    the flaw, narrated as it happens, then against the correct server; writes an HTML report.
    Exit 0 when the flaw was caught and the fix held, 1 otherwise."""
    from harness.demo import failure_mode, failure_modes, mode_lines, run_demo

    if list_modes or flaw is None:
        for line in mode_lines(failure_modes()):
            click.echo(line)
        if flaw is None and not list_modes:
            click.echo("\nshow one with: idem-harness demo NAME")
        return
    mode = failure_mode(flaw)
    report_dir = report_dir or Path("reports") / datetime.now().strftime(
        f"demo-{mode.name}-%Y%m%d-%H%M%S")
    result = run_demo(mode, report_dir=report_dir, console=Console(), seed=seed)
    sys.exit(EXIT_PASS if result.as_expected else EXIT_FINDINGS)

"""The ``idem-harness`` command: each subcommand parses its flags and calls the engine."""

from __future__ import annotations

import click

from harness.cli._catalog import explain, list_scenarios
from harness.cli._matrix import matrix
from harness.cli._run import check, run
from harness.cli._serve import serve

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="idem-harness")
def main() -> None:
    """Fault-injection harness for HTTP idempotency keys."""


for command in (run, check, list_scenarios, explain, matrix, serve):
    main.add_command(command)

"""The ``idem-harness`` command: each subcommand parses its flags and calls the engine."""

from __future__ import annotations

import click

from harness._interrupts import interrupt_on_signals
from harness.cli._catalog import explain, list_scenarios
from harness.cli._demo import demo
from harness.cli._explore import explore_command, replay_command
from harness.cli._init import init
from harness.cli._load import load
from harness.cli._matrix import matrix
from harness.cli._probe import probe
from harness.cli._reproduce import reproduce
from harness.cli._run import check, run
from harness.cli._serve import serve

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="idem-harness")
def main() -> None:
    """Fault-injection harness for HTTP idempotency keys."""
    interrupt_on_signals()


for command in (run, check, list_scenarios, explain, matrix, serve, demo, load,
                explore_command, replay_command, init, probe, reproduce):
    main.add_command(command)

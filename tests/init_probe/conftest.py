"""Fixtures for ``init`` and ``probe``: the OpenAPI documents written for these tests, the real
commands (run in this process through click's test runner: a fresh interpreter per command
would cost more than the command; each reuses the session's Toxiproxy), and libfaketime for
drafted targets the harness starts (their [clock] moves from outside)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from harness.cli._init import init
from harness.cli._probe import probe
from harness.cli._run import run
from harness.services._toxiproxy import ToxiproxyServer
from tests.faketime.conftest import faketime_ready

__all__ = ["DOCUMENTS", "ROOT", "cli", "faketime_ready"]

DOCUMENTS = Path(__file__).parent / "documents"
ROOT = Path(__file__).parents[2]
_COMMANDS: dict[str, click.Command] = {"init": init, "probe": probe, "run": run}


def cli(env: dict[str, str], command: str, *args: str) -> Result:
    """``idem-harness COMMAND ARGS``; the command's exit code is ``exit_code``."""
    return CliRunner().invoke(_COMMANDS[command], list(args), env=env)


@pytest.fixture
def env(toxiproxy_server: ToxiproxyServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[
        dict[str, str]]:
    """The session's Toxiproxy, and the checkout as the directory the services start in (the
    corpus services are modules of it)."""
    monkeypatch.chdir(ROOT)
    yield {"TOXIPROXY_URL": toxiproxy_server.url}

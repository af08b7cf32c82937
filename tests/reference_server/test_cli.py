"""The command line: bad options are usage errors that say what to write, before anything
starts; a store that cannot be opened stops the process with a reason."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reference_server.cli import serve
from reference_server.flaws import FLAWS


@pytest.mark.parametrize(("arguments", "message"), [
    (["--host", "0.0.0.0"], "not a loopback address; pass --allow-remote"),
    (["--host", "192.0.2.1"], "--allow-remote"),
    (["--lease", "5x"], "write 30, 30s, 1.5s"),
    (["--retention", "0"], "longer than zero"),
    (["--wait-timeout", "-1s"], "is not a duration"),
    (["--store", "mysql://127.0.0.1/x"], "unknown kind of store"),
    (["--store", "sqlite://keys.sqlite3"], "absolute path"),
    (["--store", "sqlite:///no/such/directory/keys.sqlite3"], "does not exist"),
    (["--store", "sqlite:///relative.db"], "a file in the filesystem root"),
    (["--flaw", "nope"], "choose one of: server-generated-key"),
    (["--mode", "relaxed"], "'strict', 'lax'"),
    (["--port", "70000"], "70000"),
    (["--max-waiters", "-1"], "-1"),
])
def test_bad_options_are_usage_errors(arguments: list[str], message: str) -> None:
    result = CliRunner().invoke(serve, arguments)
    assert result.exit_code == 2
    assert message in result.output


def test_help_lists_every_flaw_and_hides_the_bench_switch() -> None:
    result = CliRunner().invoke(serve, ["--help"])
    assert result.exit_code == 0
    unwrapped = "".join(result.output.split())
    assert all(name in unwrapped for name in FLAWS)
    assert "--no-idempotency" not in result.output


def test_an_unreachable_database_stops_the_server_with_the_reason(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reference_server", "--port", "1", "--store",
         "postgresql://nobody@127.0.0.1:1/nothing"],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 3
    assert "Connection refused" in result.stderr
    assert "Traceback" not in result.stderr and "check --store" in result.stderr
    assert result.stdout == ""


def test_a_port_in_use_is_a_usage_error_that_names_it(tmp_path: Path) -> None:
    """``serve --port P`` with P taken: exit 2 (a usage error), "port P is in use", not 3
    (inconclusive) with only uvicorn's log line (issue 38, item 11)."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        for command in ([sys.executable, "-m", "reference_server"],
                        [sys.executable, "-m", "harness.cli", "serve"]):
            result = subprocess.run(
                [*command, "--port", str(port), "--store",
                 f"sqlite:///{tmp_path / 'keys.sqlite3'}"],
                capture_output=True, text=True, timeout=60)
            assert result.returncode == 2, result.stderr
            assert f"port {port} is in use" in result.stderr
            assert "--port" in result.stderr and "Traceback" not in result.stderr

"""What the commands say about themselves: every exit code a run can end with."""

from __future__ import annotations

from click.testing import CliRunner

from harness.cli import main


def test_run_help_lists_every_exit_code() -> None:
    text = CliRunner().invoke(main, ["run", "--help"]).output
    for code in ("0 ", "1 ", "2 ", "3 ", "130", "143"):
        assert f"\n    {code}" in text or f" {code} by SIGTERM" in text, code
    assert "inconclusive" in text and "interrupted" in text

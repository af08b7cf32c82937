"""Errors that name their cause (issue 38, items 9 and 10): a target whose ``ready_path``
never answers 2xx is told what it answered and which setting to check; a target whose first
plain request does not succeed (the wrong route, the wrong service) stops the run at once with
exit 2 and the answer it got, instead of playing the whole catalog against it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.targets._loader import BUILTIN_TARGETS
from tests.harness.test_run_cli import env, harness

__all__ = ["env"]


def _reference_file(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    """The reference server's own target file with ``edits`` made, beside nothing else."""
    text = (BUILTIN_TARGETS / "reference.toml").read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "target.toml"
    path.write_text(text)
    return path


def test_a_ready_path_that_answers_404_is_named_with_its_answer(
        env: dict[str, str], tmp_path: Path) -> None:
    target = _reference_file(tmp_path, ('ready_path = "/_admin/health"',
                                        'ready_path = "/health"\nready_timeout = "3s"'))
    done = harness(env, "run", "--target", str(target), "--scenario", "key-reuse",
                   "--report-dir", str(tmp_path / "r"), timeout=60)
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert "GET /health answered 404" in said, said
    assert "ready_path" in said and "Traceback" not in said


@pytest.mark.parametrize(("edit", "answer"), [
    (('path = "/charges"', 'path = "/chargez"'), "404"),
    (('method = "POST"\npath = "/charges"', 'method = "PATCH"\npath = "/charges"'), "405"),
])
def test_a_first_plain_request_that_fails_stops_the_run_with_its_answer(
        env: dict[str, str], tmp_path: Path, edit: tuple[str, str], answer: str) -> None:
    target = _reference_file(tmp_path, edit)
    done = harness(env, "run", "--target", str(target), "--report-dir", str(tmp_path / "r"),
                   timeout=120)
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert re.search(rf"first plain request \(\w+ /charge\w? with a fresh key\) got {answer}",
                     said), said
    assert "[endpoint]" in said and "Traceback" not in said
    assert "timeout-after-commit" not in said, "no scenario may have run"
    assert not (tmp_path / "r").exists(), "a refused run leaves no report directory behind"

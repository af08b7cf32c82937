"""Report files are written whole, readable by whoever the umask allows, or not at all: a report
directory that cannot be written is a usage error (exit 2) that says why, never a traceback
that CI reads as findings."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from harness.reports import write_atomic
from tests.harness.test_run_cli import HARNESS, env

__all__ = ["env"]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _with_umask(mask: int) -> None:
    os.umask(mask)


def test_report_files_follow_the_umask(env: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "run"
    done = subprocess.run([*HARNESS, "run", "--reference", "--flaw", "no-body-hash",
                           "--scenario", "key-reuse", "--seed", "3", "--report-dir", str(report),
                           "--quiet"], capture_output=True, text=True, env=env, timeout=240,
                          preexec_fn=lambda: _with_umask(0o022))
    assert done.returncode == 1, done.stderr
    for name in ("results.json", "history.jsonl", "junit.xml", "index.html"):
        assert _mode(report / name) == 0o644, name
    scripts = list((report / "reproduce").glob("*.sh"))
    assert scripts and all(_mode(script) == 0o755 for script in scripts)


def test_a_rewritten_file_keeps_its_mode_and_a_new_one_gets_the_umasks(tmp_path: Path) -> None:
    kept = tmp_path / "target.toml"
    kept.write_text("old")
    kept.chmod(0o640)
    write_atomic(kept, "new")
    assert kept.read_text() == "new" and _mode(kept) == 0o640
    previous = os.umask(0o027)
    try:
        write_atomic(tmp_path / "fresh.json", "{}")
        write_atomic(tmp_path / "run.sh", "true", executable=True)
    finally:
        os.umask(previous)
    assert _mode(tmp_path / "fresh.json") == 0o640
    assert _mode(tmp_path / "run.sh") == 0o750


def test_init_writes_a_target_file_others_may_read(tmp_path: Path) -> None:
    document = Path(__file__).parents[1] / "init_probe" / "documents" / "payments-3.0.yaml"
    output = tmp_path / "service.toml"
    done = subprocess.run([*HARNESS, "init", "--openapi", str(document), "--start",
                           "python -m app --port {port}", "-o", str(output)],
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=lambda: _with_umask(0o022))
    assert done.returncode == 0, done.stderr
    assert _mode(output) == 0o644

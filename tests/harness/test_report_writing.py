"""Report files are written whole, readable by whoever the umask allows, or not at all: a report
directory that cannot be written is a usage error (exit 2) that says why, never a traceback
that CI reads as findings."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from harness.reports import write_atomic
from tests.harness.test_run_cli import HARNESS, env
from tests.missing import missing

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


@pytest.mark.parametrize("directory", ["/proc/idem-report", "/sys/kernel/idem-report"])
def test_a_report_directory_nothing_can_be_made_in_is_a_usage_error(directory: str) -> None:
    done = subprocess.run([*HARNESS, "run", "--reference", "--scenario", "key-reuse",
                           "--report-dir", directory], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and f"{directory} cannot be written" in done.stderr
    assert not Path(directory).exists()


def test_a_full_disk_is_a_usage_error_and_leaves_no_file_half_written(
        env: dict[str, str], tmp_path: Path) -> None:
    """A 140 KiB filesystem of the test's own (in a mount namespace of its own, so nothing
    outlives the test): the target starts and the run goes, then the report does not fit."""
    if shutil.which("unshare") is None:
        missing("the `unshare` command (util-linux) makes the test's own small filesystem",
                kind="tool")
    disk = tmp_path / "disk"
    disk.mkdir()
    command = [*HARNESS, "run", "--reference", "--flaw", "no-body-hash", "--scenario",
               "key-reuse", "--seed", "3", "--quiet", "--report-dir", str(disk / "report")]
    script = (f"mount -t tmpfs -o size=140k tmpfs {disk} || exit 99\n"
              f"{shlex.join(command)}\necho \"exit=$?\"\nfind {disk} -type f\n")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "bash", "-c",
                           script], capture_output=True, text=True, env=env, timeout=240)
    if done.returncode == 99:
        missing(f"cannot mount a tmpfs in a mount namespace: {done.stderr.strip()}",
                kind="capability")
    assert "exit=2" in done.stdout, done.stdout + done.stderr
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr
    assert "no report file was left half-written" in done.stderr
    left = [line for line in done.stdout.splitlines()[1:] if line.strip()]
    assert left == [], f"left behind: {left}"

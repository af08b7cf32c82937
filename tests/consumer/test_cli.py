"""``idem-harness run --reference-consumer`` and ``check`` on a consumer run, as a user runs
them: exit codes, the report directory, and usage errors before anything starts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def idem(*args: str, env_url: str | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **({"IDEM_AMQP_URL": env_url} if env_url else {})}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=240, env=env, check=False)


@pytest.mark.parametrize(("args", "expected"), [
    (["--flaw", "nope"], "unknown consumer flaw 'nope'"),
    (["--reference"], "give one of --target FILE, --reference and --reference-consumer"),
    (["--postgres", "--store", "sqlite:///x.db"], "not both"),
])
def test_usage_errors_exit_2_before_anything_starts(args: list[str], expected: str) -> None:
    done = idem("run", "--reference-consumer", *args)
    assert done.returncode == 2 and expected in done.stderr and "Traceback" not in done.stderr


def test_a_flaw_is_a_failed_run_and_check_judges_it_again(broker: str, tmp_path: Path) -> None:
    report = tmp_path / "run"
    done = idem("run", "--reference-consumer", "--flaw", "no-dedup", "--scenario", "lost-ack",
                "--report-dir", str(report), "--quiet", env_url=broker)
    assert done.returncode == 1, done.stderr
    results = json.loads((report / "results.json").read_text())
    verdicts = {s["name"]: s["verdict"] for s in results["scenarios"]}
    assert verdicts == {"lost-ack": "fail"}  # an HTTP scenario is a usage error (issue 38)
    assert "P1" in {f["property"] for s in results["scenarios"] for f in s.get("findings", [])}
    assert "RabbitMQ" in (report / "index.html").read_text()  # the broker's lane
    again = idem("check", str(report))
    assert again.returncode == 1 and "P1" in again.stdout + again.stderr

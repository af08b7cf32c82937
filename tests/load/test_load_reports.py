"""A load run's report is honest whatever happens: Ctrl-C half-way still writes it (marked
incomplete, judged on what ran), and each finding has a script that replays its key after the
run, against a fresh server, and says whether it broke again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.services._toxiproxy import ToxiproxyServer

HARNESS = [sys.executable, "-m", "harness.cli"]


def _env(toxiproxy: ToxiproxyServer) -> dict[str, str]:
    return {**os.environ, "TOXIPROXY_URL": toxiproxy.url, "COLUMNS": "200"}


def test_ctrl_c_half_way_writes_the_report_marked_incomplete(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    report, log = tmp_path / "run", tmp_path / "load.log"
    env = _env(toxiproxy_server)
    with log.open("wb") as output:
        load = subprocess.Popen([*HARNESS, "load", "--reference", "--servers", "2", "--users",
                                 "4", "--spawn-rate", "20", "--duration", "60s", "--seed", "3",
                                 "--report-dir", str(report)], stdout=output,
                                stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + 120
        while "load started" not in log.read_text() and time.monotonic() < deadline:
            assert load.poll() is None, log.read_text()
            time.sleep(0.2)
        time.sleep(2)  # some charges made
        load.send_signal(signal.SIGINT)
        assert load.wait(timeout=120) == 130, log.read_text()
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    said = log.read_text()
    assert "share the PostgreSQL database idem_load_" in said  # not the programs' directory
    assert "/usr/lib/postgresql" not in said
    results = json.loads((report / "results.json").read_text())
    assert results["complete"] is False and results["stopped_by"] == "SIGINT"
    assert results["verdict"] == "incomplete"
    assert results["scenarios"][0]["requests"] > 0
    assert "stopped early by SIGINT" in results["scenarios"][0]["reason"]
    assert json.loads((report / "load.json").read_text())["figures"]["keys"] > 0
    assert "INCOMPLETE" in (report / "index.html").read_text().upper()
    check = subprocess.run([*HARNESS, "check", str(report)], capture_output=True, text=True,
                           env=env, timeout=120)
    assert check.returncode == 130, check.stderr


def test_a_load_finding_replays_from_its_script_after_the_run(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    env = _env(toxiproxy_server)
    report = tmp_path / "run"
    done = subprocess.run([*HARNESS, "load", "--reference", "--flaw", "check-then-insert",
                           "--users", "4", "--spawn-rate", "20", "--duration", "3s", "--seed",
                           "3", "--report-dir", str(report)], capture_output=True, text=True,
                          env=env, timeout=240)
    assert done.returncode == 1, done.stderr
    findings = json.loads((report / "results.json").read_text())["scenarios"][0]["findings"]
    line = next(f["reproduce"] for f in findings if f["property"] == "P1")
    assert line.startswith("bash ") and "curl" not in line
    script = Path(line.split()[1])
    replay = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env,
                            timeout=240)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "reproduced: P1" in replay.stdout and "broke again in load" in replay.stdout
    fixed = tmp_path / "fixed.sh"
    fixed.write_text(script.read_text().replace('"flaw": "check-then-insert"', '"flaw": null'))
    replay = subprocess.run(["bash", str(fixed)], capture_output=True, text=True, env=env,
                            timeout=240)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "not reproduced this time: load came out pass" in replay.stdout

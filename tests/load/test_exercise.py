"""A load run must exercise idempotency, or say it did not (issue 14, item 6).

A short run whose charges each got their answer at once sent no key twice, so a server without
any idempotency layer passed it.  Now a share of charges is double-submitted (the same key from
two connections at once) and reused with another body, whatever the chaos; and a run that sent no
key twice, or whose chaos cost no attempt its answer, is inconclusive (exit 3) with the reasons.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from rich.console import Console

from harness.http.load import (
    CHAOS_PROFILES,
    LoadConfig,
    Window,
    chaos_schedule,
    load_summary,
    run_load,
)
from harness.http.load._exercise import not_exercised
from harness.http.load._schedule import NETWORK_FAULTS
from harness.judging._analysis import View
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target

HARNESS = [sys.executable, "-m", "harness.cli"]


def test_without_chaos_double_submits_find_a_check_then_insert(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    env = {**os.environ, "TOXIPROXY_URL": toxiproxy_server.url, "COLUMNS": "80"}
    done = subprocess.run(
        [*HARNESS, "load", "--reference", "--flaw", "check-then-insert", "--users", "3",
         "--spawn-rate", "20", "--duration", "2s", "--chaos", "none", "--seed", "42",
         "--report-dir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert done.returncode == 1, done.stderr
    figures = json.loads((tmp_path / "load.json").read_text())["figures"]
    assert figures["faults"] == 0 and figures["double_submits"] > 0
    assert figures["duplicates"] >= 1
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    doubled = {(e.get("tenant"), e["key"]) for e in history
               if e["f"] == "request" and e.get("label") == "double-submit"}
    duplicated = set(figures["duplicate_keys"])
    assert duplicated and all(any(key.endswith(k) for _, k in doubled) for key in duplicated)
    assert figures["reuses"] > 0 and figures["reuses_refused"] == figures["reuses"]
    # Issue 14 item 15: at 80 columns a finding's reproduction line is still one line, whole
    # (issue 26: a script that works after the run, not a curl to a port that is gone).
    lines = [line for line in done.stderr.splitlines() if "reproduce: " in line]
    assert lines and all(line.rstrip().endswith(".sh") and "reproduce: bash " in line
                         for line in lines), lines[:2]


def test_a_run_that_sent_no_key_twice_and_lost_no_answer_is_inconclusive(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    # A latency spike the clients wait out, no double submits, no reuse: nothing was tested.
    result = run_load(LoadConfig(
        target=reference_target(store=None, flaw="check-then-insert"), users=2,
        spawn_rate=20, duration=2.0, report_dir=tmp_path, chaos="flaky-network", seed=42,
        double_submit=0.0, reuse=0.0, schedule=[Window(0.3, 1.5, "response-latency")],
        toxiproxy=toxiproxy_server,
    ))
    assert result.figures["keys"] > 0 and result.figures["retries"] == 0
    assert result.run.verdict == "inconclusive" and result.exit_code == 3
    assert len(result.not_exercised) == 2
    assert "no key of the" in result.not_exercised[0]
    assert "cost no attempt its answer" in result.not_exercised[1]
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(load_summary(result))
    text = console.export_text()
    assert "INCONCLUSIVE" in text and "not exercised: no key of the" in text
    assert "PASS" not in text


def test_a_run_too_short_for_its_chaos_says_so() -> None:
    assert not_exercised(View([]), chaos="flaky-network", schedule=[], duration=4.0) == [
        "no charge was sent, so nothing was judged",
        "no fault of --chaos flaky-network fitted in a 4s run; run longer (30s or more)"]
    assert not_exercised(View([]), chaos="none", schedule=[], duration=4.0) == [
        "no charge was sent, so nothing was judged"]


def test_the_first_network_fault_costs_answers() -> None:
    for profile in ("flaky-network", "storm"):
        assert profile in CHAOS_PROFILES
        for seed in range(200):
            schedule = chaos_schedule(profile, duration=10, instances=1, seed=seed,
                                      request_timeout=2.0, can_restart=False)
            network = [w for w in schedule if w.fault in NETWORK_FAULTS]
            assert network, f"seed {seed}: a 10 s run fits a fault"
            assert network[0].fault != "response-latency", seed

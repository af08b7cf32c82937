"""Load runs with a small budget: the real reference server, the real Toxiproxy, real Locust.

Each run is a few seconds of a few users; the Locust processes are started by the engine (this
process never imports Locust).  One run goes through the command line, single-process and under
the storm profile; one is distributed (a master and one worker) over two server processes on
PostgreSQL; one shows a flawed server's duplicates found under load.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness.http.load import LoadConfig, Window, run_load, write_load_report
from harness.services._postgres import PostgresServer
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target

HARNESS = [sys.executable, "-m", "harness.cli"]


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_load_under_storm_from_the_command_line(toxiproxy_server: ToxiproxyServer,
                                               tmp_path: Path) -> None:
    env = {**os.environ, "TOXIPROXY_URL": toxiproxy_server.url}
    done = subprocess.run(
        [*HARNESS, "load", "--reference", "--users", "4", "--spawn-rate", "20",
         "--duration", "4s", "--chaos", "storm", "--seed", "3", "--report-dir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "PASS" in done.stderr and "P1 pass" in done.stderr

    load = _json(tmp_path / "load.json")
    figures = load["figures"]
    assert figures["keys"] > 0 and figures["requests"] >= figures["keys"]
    assert figures["duplicates"] == 0 and figures["lost_outcomes"] == 0
    assert figures["latency_ms"]["first"]["p50"] is not None
    assert load["fault_windows"], "the storm profile acted"
    assert all(w["start"] <= w["end"] for w in load["fault_windows"])
    assert {"crash"} <= {w["fault"] for w in load["fault_windows"]}
    assert load["timeline"] and set(load["timeline"][0]) == {
        "t", "requests_per_s", "p50_ms", "p95_ms", "p99_ms"}

    results = _json(tmp_path / "results.json")
    assert results["verdict"] == "pass"
    assert results["scenarios"][0]["property_verdicts"] == {
        "P1": "pass", "P2": "pass", "P4": "pass", "P5": "pass"}
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    assert {"request", "fault", "crash", "restart", "effects"} <= {e["f"] for e in history}
    assert [e["index"] for e in history] == list(range(len(history)))
    with (tmp_path / "locust_stats.csv").open() as handle:
        names = {row["Name"] for row in csv.DictReader(handle)}
    assert "/charges (first attempt)" in names
    assert (tmp_path / "locust.html").stat().st_size > 0
    assert (tmp_path / "junit.xml").exists()


def test_distributed_load_over_two_servers_sharing_postgresql(
        toxiproxy_server: ToxiproxyServer, postgres_server: PostgresServer,
        tmp_path: Path) -> None:
    store = postgres_server.create_database("idem_load_test")
    result = run_load(LoadConfig(
        target=reference_target(store=store, flaw=None, servers=2), users=4, spawn_rate=20,
        duration=3.0, report_dir=tmp_path, servers=2, workers=1, seed=5,
        chaos="flaky-network", schedule=[Window(0.5, 1.5, "response-reset")],
        toxiproxy=toxiproxy_server,
    ))
    assert result.run.verdict == "pass", result.check
    assert result.figures["keys"] > 0 and result.figures["duplicates"] == 0
    attempts = [e for e in result.run.outcomes[0].events
                if e.f == "request" and e.type == "invoke"]
    assert {e.process[:3] for e in attempts} == {"w1u"}
    assert {e.value.get("instance", 0) for e in attempts} == {0, 1}
    write_load_report(result, tmp_path)
    assert (tmp_path / "locust_stats_history.csv").exists()


def test_a_flawed_server_duplicates_under_a_retry_storm(toxiproxy_server: ToxiproxyServer,
                                                        tmp_path: Path) -> None:
    # A stall of three client timeouts: every user's charge is retried into it, and when it
    # clears the held copies of each key land at once.
    result = run_load(LoadConfig(
        target=reference_target(store=None, flaw="insert-after-work"), users=3,
        spawn_rate=20, duration=2.5, report_dir=tmp_path, request_timeout=0.5, seed=9,
        schedule=[Window(0.5, 2.0, "request-stall")], toxiproxy=toxiproxy_server,
    ))
    assert result.exit_code == 1
    duplicates = result.figures["duplicate_keys"]
    assert result.figures["duplicates"] == len(duplicates) >= 1
    findings = [f for f in result.check.findings if f.property == "P1"] if result.check else []
    assert {f.key for f in findings} == set(duplicates)
    assert all(f.key and f.reproduce.startswith(f"bash {tmp_path}/reproduce/load-")
               for f in findings)

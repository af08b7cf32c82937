"""What the corpus's test modules share: the correct services, the seed, and the correct
services' runs and explorations played as separate processes side by side.

Correct-service runs are mostly waiting (retry backoff, leases, slowed handlers), so they run
as separate processes, ``PARALLEL`` at once; ``run`` and ``explore`` are separate test modules so
the suite's workers play them at the same time (a module stays on one worker)."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from harness.services._toxiproxy import ToxiproxyServer
from tests.bounded import run_for_at_most
from tests.corpus.conftest import TARGETS, corpus_target

SERVICES = ("ledger_sqlite", "two_routes", "long_poll", "fresh_validation", "totals_only",
            "query_clock", "upsert_sqlite", "stored_errors", "wsgi_latin1", "any_keys",
            "per_fault_errors", "redis_store", "locked_423", "memory_clock", "memory_clock_blind",
            "renewed_lease", "sweeping_cleanup", "redis_ledger", "memory_clock_unsaid",
            "redis_seconds", "redis_stored_errors", "one_worker")
#: The services whose exploration takes longest (real-time leases, Redis behind the store
#: proxy), started first so the last one to finish is a short one.
SLOWEST_FIRST = ("renewed_lease", "memory_clock_unsaid", "redis_store", "redis_ledger",
                 "redis_seconds", "redis_stored_errors", "ledger_sqlite")
SEED = 7
#: Examples each exploration draws after its opening, which tells every story of the opening
#: first (16 to 22 per service: the common stories, each field's reuse, each hostile key).  The
#: CI budget (30) on 22 services took 16 minutes of the suite's 18; the sweeps over seeds at the
#: default budget are the bench's (`bench/detection.py --correct-only --front explore`).
EXPLORE_EXAMPLES = 10
PARALLEL = 4
#: The most one service's run or exploration may take before it is stopped (its test fails):
#: renewed_lease's exploration waits out its renewed 4 s lease in real time, again and again,
#: and took 413 s under a full suite (stopped at 420 s once the opening grew).
PLAY_SECONDS = 540.0


def listed(findings: list[dict[str, Any]]) -> str:
    return "\n".join(f"  {f['scenario']}: {f['property']} {f['message']}" for f in findings)


def findings_of(results: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**f, "scenario": s["name"]} for s in results["scenarios"] for f in s["findings"]]


def play_every_correct_service(front: str, tmp_path_factory: pytest.TempPathFactory,
                               toxiproxy: ToxiproxyServer) -> dict[str, Path]:
    """``idem-harness FRONT`` (seeded; the explorer at ``EXPLORE_EXAMPLES``) on every correct
    service, at most ``PARALLEL`` at once, slowest first: service -> its report directory,
    holding the command's stderr too."""
    for name in SERVICES:
        corpus_target(name)  # a missing service or package fails (CI) or skips here
    env = {**os.environ, "TOXIPROXY_URL": toxiproxy.url}
    order = [*SLOWEST_FIRST, *(n for n in SERVICES if n not in SLOWEST_FIRST)]
    reports = {name: tmp_path_factory.mktemp(f"{front}-{name}") for name in order}
    # one search each (the services already run side by side): --jobs has tests of its own
    extra = (["--max-examples", str(EXPLORE_EXAMPLES), "--shrink-time", "10s", "--jobs", "1"]
             if front == "explore" else [])

    def play(name: str) -> None:
        done = run_for_at_most(
            [sys.executable, "-m", "harness.cli", front, "--target", str(TARGETS / f"{name}.toml"),
             "--seed", str(SEED), "--report-dir", str(reports[name]), "--quiet", *extra],
            PLAY_SECONDS, env=env)
        over = f"{front} took over {PLAY_SECONDS:g} s\n" if done.timed_out else ""
        (reports[name] / "stderr.txt").write_text(over + done.stderr)  # that service's test fails

    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(play, order))
    return reports

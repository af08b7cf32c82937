"""An exploration says what it never tried (issue 37's sweep): on a target it restarts whose
file says nothing of its clock across a restart, the explorer draws clock jumps and restarts
in two parts, never in one story (tests/corpus/test_clock_parts.py), so a flaw only a story of
both would show cannot be found; the console says so and how to fix the file, not only
results.json."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.services._toxiproxy import ToxiproxyServer
from tests.corpus.conftest import TARGETS, corpus_target


def test_explore_prints_why_no_story_holds_a_jump_and_a_restart(toxiproxy_server: ToxiproxyServer,
                                                   report_dir: Path) -> None:
    corpus_target("memory_clock_unsaid")  # a missing service fails (CI) or skips here
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "explore", "--target",
         str(TARGETS / "memory_clock_unsaid.toml"), "--no-opening", "--max-examples", "1",
         "--seed", "1", "--jobs", "1", "--report-dir", str(report_dir)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "TOXIPROXY_URL": toxiproxy_server.url})
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("note: clock jumps and restarts are drawn in two parts, each on a deployment of "
            "its own, never in one story" in done.stdout), done.stdout
    assert "declare [hooks.clock] read or restart_resets" in done.stdout

"""Locust stays in processes of its own: nothing else imports it, and it refuses to start late.

Importing ``locust`` after ``ssl`` ends in a RecursionError (gevent's patching); these tests
guard the line that keeps the CLI, the engine and this test process on the right side of it.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from harness import UsageError
from harness.http.load import CHAOS_PROFILES, chaos_schedule
from harness.http.load._schedule import CRASH, STALL

PROBE = (
    "import sys, harness.cli, harness.http.load\n"
    "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('locust', 'gevent'))\n"
    "print(','.join(loaded))\n"
)


def test_the_cli_and_the_engine_never_import_locust() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_a_locust_process_started_the_wrong_way_refuses_with_the_reason() -> None:
    done = subprocess.run(
        [sys.executable, "-c",
         "from harness.http.load._process import main; raise SystemExit(main())",
         "--plan", "unused.json", "--role", "local"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "must import locust before anything else" in done.stderr


def test_a_chaos_schedule_is_a_pure_function_of_its_seed() -> None:
    def schedule(profile: str, seed: int) -> list[object]:
        return list(chaos_schedule(profile, duration=60, instances=2, seed=seed,
                                   request_timeout=2.0, can_restart=True))

    for profile in CHAOS_PROFILES:
        assert schedule(profile, 1) == schedule(profile, 1)
    assert schedule("none", 1) == []
    storm = chaos_schedule("storm", duration=60, instances=2, seed=1, request_timeout=2.0,
                           can_restart=True)
    assert schedule("storm", 1) != schedule("storm", 2)
    assert {w.fault for w in storm} >= {CRASH, STALL}
    assert all(0 <= w.start < w.end <= 60 for w in storm)
    network = [w for w in storm if w.fault != CRASH]
    assert all(a.end <= b.start for a, b in itertools.pairwise(network))


def test_crashes_need_a_target_the_harness_may_restart() -> None:
    with pytest.raises(UsageError, match="restartable"):
        chaos_schedule("crashy-server", duration=60, instances=1, seed=1,
                       request_timeout=2.0, can_restart=False)
    storm = chaos_schedule("storm", duration=60, instances=1, seed=1, request_timeout=2.0,
                           can_restart=False)
    assert storm and CRASH not in {w.fault for w in storm}

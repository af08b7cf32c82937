"""The suite's bounded runs stop a command over its time with SIGTERM first, so a harness
stops what it started before it goes (``subprocess.run(timeout=...)`` killed it outright)."""

from __future__ import annotations

import sys
import textwrap

from tests.bounded import run_for_at_most

#: Says "stopping" when SIGTERM arrives, as a harness stops its children, then exits 143.
STOPS_ON_SIGTERM = textwrap.dedent(
    """
    import signal, sys
    def stop(signum, frame):
        print("stopping what I started", flush=True)
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop)
    print("started", flush=True)
    signal.pause()
    """
)


def test_a_command_over_its_time_is_asked_to_stop_before_it_is_killed() -> None:
    done = run_for_at_most([sys.executable, "-c", STOPS_ON_SIGTERM], 5.0)  # once it started
    assert done.timed_out and done.returncode == 143
    assert done.stdout.splitlines() == ["started", "stopping what I started"]


def test_a_command_within_its_time_is_left_to_finish() -> None:
    done = run_for_at_most([sys.executable, "-c", "print('done')"], 30.0)
    assert not done.timed_out and done.returncode == 0 and done.stdout == "done\n"

"""A command line run for at most a given time, stopped as a supervisor should stop it.

``subprocess.run(timeout=...)`` kills the command outright: a harness killed so never stops
the target, Toxiproxy or store it started, and they outlive the suite.  SIGTERM first lets the
harness stop them (it turns SIGTERM into an exit); SIGKILL only if it does not end."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Finished", "run_for_at_most"]

#: How long a harness stopped by SIGTERM may take to stop what it started.
GRACE_SECONDS = 30.0


@dataclass(frozen=True)
class Finished:
    """What the command said, its exit code, and whether it ran over its time."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def run_for_at_most(args: Sequence[str], seconds: float, **popen: Any) -> Finished:
    """Run ``args`` (text mode, output captured) for at most ``seconds``."""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          **popen) as process:
        try:
            out, err = process.communicate(timeout=seconds)
            return Finished(process.returncode, out, err, timed_out=False)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                out, err = process.communicate(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
            return Finished(process.returncode, out, err, timed_out=True)

"""The last pass of shrinking: drop one drawn step at a time while the story still breaks the
same property.

Hypothesis shrinks the choices behind a story, and every attempt it makes is a whole story
against a real server, so within the exploration's time budget it can stop with steps that
changed nothing (a fault switched on and healed, a request nobody retried).  Trying the story
without each step in turn, last step first, and keeping every drop after which the same
property still breaks, removes those in a few runs.  A drop that leaves a step naming what no
longer exists is not tried.
"""

from __future__ import annotations

import time

from harness.explore._failure import Failure
from harness.explore._session import Session
from harness.explore._validity import problems_with

__all__ = ["drop_steps"]


def drop_steps(session: Session, failure: Failure, *, deadline: float) -> Failure:
    """The shortest version of ``failure`` found by dropping steps before ``deadline``."""
    if failure.check is None or not failure.check.findings:
        return failure
    wanted = failure.check.findings[0].property
    actions = [s.action for s in failure.steps if not s.settle and s.action is not None]
    best = failure
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for index in reversed(range(len(actions))):
            if time.monotonic() >= deadline:
                break
            candidate = actions[:index] + actions[index + 1:]
            if not candidate or problems_with(candidate, session.target):
                continue
            found = session.play(candidate).failure
            if found and found.check and wanted in {f.property for f in found.check.findings}:
                actions, best, progress = candidate, found, True
    return best

"""What every front end's telling of a story in real time shares: how much of it an exploration
affords, and what a telling is.

A finding whose evidence needs a clock jump made while one of its key's operations ran is only
"seen with a moved clock" until the story breaks the property again with real time in the
jump's place (docs/explorer.md).  How a front end's story is told so is its own
(``harness/http/explore/_real_time.py``); how many tellings an exploration affords, and what
one holds, the session (``_story_session.py``) keeps for every front end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic

from harness.explore._steps import A
from harness.judging._findings import Finding

__all__ = ["DEFER_REAL_TIME", "MAX_CONFIRMATIONS", "REAL_TIME_LIMIT", "TELLINGS_PER_PROPERTY",
           "TELLINGS_WITHOUT_JUMPS", "RealTimeStory", "keys_of"]

#: The longest jump waited out in real time (a lease or a window of up to about a minute and
#: a half, with the harness's margin past it).
REAL_TIME_LIMIT = 90.0
#: Stories an exploration tells in real time; past that, findings stay "seen only with a
#: moved clock".
MAX_CONFIRMATIONS = 3
#: Stories of one property told in real time: a property real time did not confirm twice is
#: not told again.
TELLINGS_PER_PROPERTY = 2
#: Stories of one property told without their jumps: each costs a story's length, and a
#: correct target whose timers a jump fools would pay it for every such example.
TELLINGS_WITHOUT_JUMPS = 3
#: Examples drawn on, while drawing, before a story is told in real time: a wait of a lease
#: costs as much as a hundred examples, and a story that needs no moved clock often comes
#: within a few (key-only at seed 8 waited 71 s for a takeover its retries' 200 showed in any
#: plain retry; check-then-insert at seed 7, 112 s).
DEFER_REAL_TIME = 10


@dataclass(frozen=True)
class RealTimeStory(Generic[A]):
    """The drawn actions with real waits in place of the jumps made while requests ran
    (``actions`` None when one is too long to wait, ``why`` says which), and how many seconds
    of waiting they hold."""

    actions: list[A] | None
    waits: float = 0.0
    why: str = ""


def keys_of(findings: Sequence[Finding]) -> frozenset[str] | None:
    """The keys whose requests a real-time telling of ``findings`` must wait through; None
    (every request's) when one of them names no key."""
    if any(f.key is None for f in findings):
        return None
    return frozenset(f.key for f in findings if f.key is not None)

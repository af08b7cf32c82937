"""What every front end's machine draws from alike: clock jumps that land where they matter,
and which earlier step a new one refers to.

An HTTP service's strategies (``harness/http/explore/_strategies.py``) and a queue consumer's
machine (``harness/consumer/explore/_machine.py``) both draw these.
"""

from __future__ import annotations

from harness._target import LEASE_SLACK

__all__ = ["PAST_THE_LEASE", "RECENT_FIRST", "WHY_JUST_WITHIN_RETENTION", "WHY_PAST_LEASE",
           "WHY_PAST_RETENTION", "clock_steps", "past_the_retention"]

#: How far past the promised lease a jump goes: beyond the checker's slack for clock skew.
PAST_THE_LEASE = LEASE_SLACK + 3.0
#: Why three of the clock jumps are made, as stories say (the opening looks them up by it).
WHY_PAST_LEASE, WHY_JUST_WITHIN_RETENTION, WHY_PAST_RETENTION = (
    "past the lease", "just within the retention", "past the retention")
#: Which earlier operation or key a step refers to, counted back from the most recent: mostly
#: the last one, since that is where a retry or a reuse usually follows.
RECENT_FIRST = (0, 0, 0, 1, 2, 3)

def clock_steps(*, lease: float | None, retention: float | None) -> list[tuple[float, str]]:
    """Clock jumps that land somewhere that matters: past the lease, a few minutes, inside the
    retention (a consumer's dedup window), past it.  Integers that never add up to the
    retention, so the harness's and the target's clocks never disagree about which side of it
    a retry falls."""
    steps: list[tuple[float, str]] = []
    if lease is not None:
        steps.append((lease + PAST_THE_LEASE, WHY_PAST_LEASE))
    if retention is None:
        return [*steps, (700.0, "a few minutes"), (21_600.0, "six hours"),
                (172_800.0, "two days")]
    if retention > 1400:
        steps.append((700.0, "a few minutes"))
    margin = _retention_margin(retention)
    return [*steps, (float(int(retention * 0.4)), "well within the retention"),
            (retention - margin, WHY_JUST_WITHIN_RETENTION), past_the_retention(retention)]


def _retention_margin(retention: float) -> float:
    return float(max(60, int(retention // 24)))


def past_the_retention(retention: float) -> tuple[float, str]:
    """The jump that takes a key just made past ``retention``: far enough past it that the
    harness's and the target's clocks agree which side a retry falls."""
    return retention + _retention_margin(retention), WHY_PAST_RETENTION

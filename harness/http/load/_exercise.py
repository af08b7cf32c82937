"""What a load run did not exercise, read off its history: the reasons it cannot pass.

A run in which every charge got its answer at once, each key sent once, judged nothing about
idempotency: a server with no idempotency layer at all would pass it.  And a run that asked for
chaos but whose faults cost no attempt its answer never tested a retry against a stored
response.  Such a run is inconclusive (exit 3), like a scenario the checker could not judge,
with each reason in words; the checker's findings, if any, still make it a failure.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.http.load._schedule import Window
from harness.judging._analysis import View

__all__ = ["not_exercised"]


def not_exercised(view: View, *, chaos: str, schedule: Sequence[Window],
                  duration: float) -> list[str]:
    """Each way the run fell short of testing what it was asked to; empty when it did not."""
    reasons = []
    keys = view.keyed()
    if not keys:
        reasons.append("no charge was sent, so nothing was judged")
    elif all(len(attempts) == 1 for _, attempts in keys):
        reasons.append(
            f"no key of the {len(keys)} was sent more than once (no retry, no double submit, "
            "no reuse), so no request tested the idempotency layer; a server without one "
            "would pass this run")
    if chaos != "none":
        unanswered = [a for _, attempts in keys for a in attempts
                      if a.completion is not None and a.completion.status is None]
        if not schedule:
            reasons.append(f"no fault of --chaos {chaos} fitted in a {duration:g}s run; run "
                           "longer (30s or more)")
        elif not unanswered and not view.crashes:
            faults = ", ".join(dict.fromkeys(w.fault for w in schedule))
            reasons.append(
                f"--chaos {chaos} acted ({faults}) but cost no attempt its answer, so no retry "
                "met a stored response; run longer (30s or more)")
    return reasons

"""When shrinking stops paying, and its last pass: drop one drawn step at a time.

A step is dropped while the story still shows a kind it is kept for (``Failure.new``: the
same property, broken the same way).

Every attempt at a shorter story is a whole story against a real server, so shrinking is worth
its time only while stories get shorter.  It stops (``enough``) when the story has the fewest
steps its property can need (``FEWEST_STEPS``), when ``STALL_ATTEMPTS`` attempts in a row made
it no shorter, or when it has taken as long again as finding the failure did, plus
``SHRINK_SLACK`` (and never past ``--shrink-time``).  Hypothesis has no public switch to stop
shrinking, so the session raises ``EnoughShrinking`` as the next example starts; it is a
``KeyboardInterrupt`` because that is what Hypothesis's engine lets through at once, without
counting the example as a failure or saving it to the example database.

Hypothesis shrinks the choices behind a story, so it can stop with steps that changed nothing
(a fault switched on and healed, a request nobody retried), and it cannot add clock jumps up:
short-ttl's story kept four jumps in a row, each needed for their sum to pass the retention.
``drop_steps`` goes straight for shorter stories: the steps the checker cited alone (or with
every other step of the keys they are about and the jumps among them: a retry needs the
request it retries), the story
``tidied`` (jumps in a row made one, a fault healed as soon as it was on left out), then runs of
steps dropped at once (halves, quarters, ... single steps, as delta debugging does), keeping
every drop after which the same property still breaks, until a pass drops nothing; a drop that
leaves a step naming what no longer exists is not tried.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._failure import Failure
from harness.explore._steps import A
from harness.explore._story_session import StorySession

__all__ = ["FEWEST_STEPS", "HYPOTHESIS_SHARE", "SHRINK_SLACK", "STALL_ATTEMPTS",
           "EnoughShrinking", "at_fewest", "drop_steps", "enough", "shrink_deadline", "tidied"]

#: The fewest drawn steps a story can break each property in (1 for the others).  P4 needs a
#: request and its reuse; P8 a key and the same key in the other tenant; P11 a request and a
#: clock step that reads the table; P6 a request, a clock jump and a late retry.
#: (The HTTP explorer's; a front end says its own in ``StorySession.fewest_steps``.)
FEWEST_STEPS = {"P4": 2, "P6": 3, "P8": 2, "P11": 2}
#: Attempts in a row that made the shortest story no shorter: shrinking has stopped paying.
STALL_ATTEMPTS = 10
#: Seconds of shrinking allowed beyond the time the failure took to find.
SHRINK_SLACK = 7.0
#: Hypothesis's part of the shrinking time; dropping steps has the rest.
HYPOTHESIS_SHARE = 0.6


class EnoughShrinking(KeyboardInterrupt):
    """Raised as an example starts once shrinking no longer pays; caught by the explorer."""


def at_fewest(failure: Failure[Any], fewest: Mapping[str, int] = FEWEST_STEPS) -> bool:
    """Is ``failure`` already as short as a story breaking its property can be (``fewest``
    steps for it, else 1)?"""
    wanted = failure.broken
    if wanted is None:
        return False
    return failure.operations <= fewest.get(wanted, 1)


def shrink_deadline(session: StorySession[Any, Any], *, limit: float) -> float | None:
    """When (``time.monotonic``) shrinking and dropping steps must end: as long after the
    hunt's first failure as the failure took to find, plus ``SHRINK_SLACK``, at most
    ``limit``."""
    if session.hunt_found is None:
        return None
    found_after = session.hunt_found[1]
    return session.hunt_started + found_after + min(limit, found_after + SHRINK_SLACK)


def enough(session: StorySession[Any, Any], *, limit: float,
           fewest: Mapping[str, int] = FEWEST_STEPS) -> str | None:
    """Why Hypothesis's shrinking should stop now (``minimal``, ``stalled``, ``time``), or
    None.  It has ``HYPOTHESIS_SHARE`` of the shrinking time; dropping steps, which goes
    straight for shorter stories, has the rest.  ``fewest``: the front end's
    ``StorySession.fewest_steps``."""
    best, deadline = session.best, shrink_deadline(session, limit=limit)
    if best is None or deadline is None or session.hunt_found is None:
        return None
    if at_fewest(best, fewest):
        return "minimal"
    if session.examples - session.improved_at >= STALL_ATTEMPTS:
        return "stalled"
    found = session.hunt_started + session.hunt_found[1]
    return "time" if time.monotonic() >= found + HYPOTHESIS_SHARE * (deadline - found) else None


def tidied(actions: Sequence[A]) -> list[A]:
    """``actions`` with every run of clock jumps made one jump of their sum (it lands where
    the last of them did), and every fault healed right after it was switched on left out
    (nothing ran under it); whether the story still breaks is for a replay to say."""
    kept: list[Any] = []
    for action in actions:
        last = kept[-1] if kept else None
        if (isinstance(action, FaultOff) and isinstance(last, FaultOn)
                and last.fault == action.fault):
            kept.pop()
        elif isinstance(action, Clock) and isinstance(last, Clock):
            why = " + ".join(w for w in (last.why, action.why) if w)
            kept[-1] = Clock(seconds=last.seconds + action.seconds, why=why,
                             cleanup=action.cleanup)
        else:
            kept.append(action)
    return kept


def drop_steps(session: StorySession[A, Any], failure: Failure[A], *,
               deadline: float) -> Failure[A]:
    """The shortest version of ``failure`` found by dropping steps before ``deadline``: first
    the story of only the steps the checker cited (failing that, of every step of the keys
    they are about and the jumps among them), then that story ``tidied`` (each tried once
    even past the deadline), then runs of steps, halving their length down to single steps,
    last run first; every drop after which the story still shows a kind ``failure`` is kept
    for is kept, and the passes repeat until one drops nothing."""
    wanted = failure.new or failure.kinds
    fewest = session.fewest_steps
    if not wanted or at_fewest(failure, fewest):
        return failure
    drawn = [s for s in failure.steps if not s.settle and s.action is not None]
    actions = [s.action for s in drawn if s.action is not None]
    findings = failure.failing_findings
    evidence = next((f.events for f in findings if (f.property, f.mechanism) in wanted),
                    findings[0].events if findings else ())
    cited_steps = {s.number for s in drawn if any(s.holds(i) for i in evidence)}
    cited = [s.action for s in drawn if s.action is not None and s.number in cited_steps]
    # the keys the cited steps are about, with every step of theirs and the clock jumps among
    # them: a retry cited without the request it retries cannot run, and one that took the
    # key over needed the jump past its lease
    keys = {s.identity for s in drawn if s.number in cited_steps and s.identity is not None}
    theirs = [s.number for s in drawn if s.number in cited_steps or s.identity in keys]
    keyed = [s.action for s in drawn if s.action is not None and (s.number in theirs or (
        isinstance(s.action, Clock) and theirs and theirs[0] < s.number < theirs[-1]))]
    best = failure

    def attempt(candidate: list[A], *, late: bool = False) -> bool:
        nonlocal best
        if (not candidate or (time.monotonic() >= deadline and not late)
                or at_fewest(best, fewest) or session.problems_with(candidate)):
            return False
        found = session.play(candidate).failure
        if found and found.shows(wanted):
            best = replace(found, new=wanted & found.kinds)
            return True
        return False

    # The cited steps alone are one story, and the likeliest shortest: tried even when
    # Hypothesis's share of the time ran over (a slow machine makes every example longer).
    if len(cited) < len(actions) and attempt(cited, late=True):
        actions = cited
    elif len(cited) < len(keyed) < len(actions) and attempt(keyed, late=True):
        actions = keyed
    tidy = tidied(actions)
    if len(tidy) < len(actions) and attempt(tidy, late=True):
        actions = tidy
    progress = True
    while progress and time.monotonic() < deadline and not at_fewest(best, fewest):
        progress = False
        size = len(actions) // 2
        while size >= 1:
            for start in range(len(actions) - size, -1, -size):  # last run first
                candidate = actions[:start] + actions[start + size:]
                if attempt(candidate):
                    actions, progress = candidate, True
            size = min(size // 2, len(actions) // 2) if size > 1 else 0
    return best

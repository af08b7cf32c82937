"""What a restart does to a test clock the target file does not describe: ``restart_resets``.

A test clock kept in a process's memory goes back to real time when the process restarts; one
kept in the store keeps its offset.  Without ``[hooks.clock] read`` (a path answering the
target's time) the harness cannot see which, and after a restart every verdict that rests on
elapsed time is unknown.  Where the target can be restarted and promises a retention, the
service itself shows it: a key made before a clock jump longer than the retention, and the
target restarted, is still replayed if the restart set the clock back, and executed anew if
the clock kept its offset.  A first restart, with no jump, tells whether keys survive a restart
at all (when they do not, nothing can be seen).
"""

from __future__ import annotations

from collections.abc import Iterator

from harness._history import Event
from harness.http.drafting._probe_session import ProbeSession
from harness.http.drafting._probe_types import Observation, answered_2xx, describe_answer

__all__ = ["restart_resets"]

SECTION = "hooks.clock"
FIELD = "restart_resets"
#: How far past the retention the clock is moved: far enough that no rounding can keep the
#: first key within it on a clock that kept the jump.
BEYOND = 3600.0


def restart_resets(session: ProbeSession) -> Iterator[Observation]:
    """Learn ``restart_resets`` where the file leaves it open and the service can show it."""
    target = session.target
    hook = target.hooks.clock
    if hook is None or hook.read is not None or hook.restart_resets is not None:
        return  # no test clock, or the harness already knows where it stands after a restart
    if "restart" not in target.capabilities():
        yield _unknown("the harness cannot restart the target (it needs a [start] table with "
                       "restartable = true) to see what a restart does to its clock")
        return
    retention = target.promises.retention
    if retention is None:
        yield _unknown("without a promised retention no key can show where a restarted clock "
                       "stands (a key older than the retention by that clock is executed anew)")
        return
    deployment = session.deployment
    survivor, survivor_body = session.key(), session.body()
    made = session.send(survivor, survivor_body, label="probe: a key before a restart")
    if not answered_2xx(made):
        yield _unknown(f"a fresh charge got {describe_answer(made)}")
        return
    session.count_now()  # the keys so far, counted while the process that made them runs
    deployment.restart(0)
    again = session.send(survivor, survivor_body, label="probe: the same key after it")
    if not _same_charge(again, made):
        yield _unknown(f"a key made before a restart got {describe_answer(again)} after it, not "
                       "its replay: the service does not keep its keys across a restart, so no "
                       "key can show what the restart did to its clock")
        return
    # The jump and the restart back to back, with no request between them: a service that
    # deletes expired keys when a request comes must not delete the key before the restart.
    before, before_body = session.key(), session.body()
    first = session.send(before, before_body, label="probe: a key before the clock moves")
    if not answered_2xx(first):
        yield _unknown(f"a fresh charge got {describe_answer(first)}")
        return
    session.count_now()
    deployment.advance_clock(retention + BEYOND)
    deployment.restart(0)
    older = session.send(before, before_body, label="probe: that key after a jump and a restart")
    jump = f"{(retention + BEYOND) / 3600:g} h"
    if _same_charge(older, first):
        yield Observation(SECTION, FIELD, "learned",
                          f"a key made before a clock jump of {jump} (past the retention) and a "
                          "restart was still replayed: the restart set the clock back", True)
    elif answered_2xx(older) and older.resource is not None and older.resource != first.resource:
        session.expect(before, 2)
        yield Observation(SECTION, FIELD, "learned",
                          f"a key made before a clock jump of {jump} (past the retention) and a "
                          "restart was executed anew: the clock kept its offset", False)
    else:
        yield _unknown(f"a key made before a clock jump of {jump} and a restart got "
                       f"{describe_answer(older)}, neither its replay nor a new charge")


def _same_charge(answer: Event, original: Event) -> bool:
    return (answered_2xx(answer) and answer.resource is not None
            and answer.resource == original.resource)


def _unknown(why: str) -> Observation:
    return Observation(SECTION, FIELD, "unknown",
                       f"{why}; after a restart the clock is then unknown, and verdicts that "
                       "rest on elapsed time are unknown: declare restart_resets (true: a "
                       "restart resets the clock; false: it keeps it) or read (a path answering "
                       "the target's time)")

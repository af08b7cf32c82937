"""A story told again in real time, to confirm what a moved clock showed.

A clock jump is not elapsed time for the target's own timers: a lease renewed every few
seconds while the handler runs, a heartbeat, a sweep on the monotonic clock see none of it.  So
a finding whose evidence needs a jump made while one of its key's requests ran is only "seen
with a moved clock" until the same story fails again with real time in its place: each such
jump becomes a wait of as long, and each slowed request that was running through it is slowed
as much more, so that it still runs when the story's next step comes.  A jump made while
nothing ran stays a jump: no timer of the target's was running for a request then.

Waiting costs real time, so only jumps up to ``REAL_TIME_LIMIT`` are waited out, and an
exploration confirms at most ``MAX_CONFIRMATIONS`` stories this way, at most
``TELLINGS_PER_PROPERTY`` of one property.  A longer jump made while a request ran passed that
request's lease on its way: where the lease is short enough, it is told as a wait just past the
lease (a takeover needs no more), and the story so told is the one reported if it breaks the
property again.

Before that wait, the story is told once without those jumps (``without_the_jumps``): a
finding that breaks its property all the same was not made by the jump, and stands at the cost
of one short story (at seed 5, four reference flaws whose first story happened to hold such a
jump waited out a 30 s lease each for a finding no jump was needed for).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

from harness._history import Event
from harness.explore._actions import Clock
from harness.explore._real_time import REAL_TIME_LIMIT, RealTimeStory
from harness.explore._steps import StepRecord
from harness.explore._strategies import PAST_THE_LEASE
from harness.http.explore._actions import Action, AwaitAnswers, Slow, Wait
from harness.judging._analysis import describe_identity

__all__ = ["in_real_time", "without_the_jumps"]

def _flights(events: Sequence[Event]) -> list[tuple[Event, float]]:
    """Each request's invocation with the history time its answer came (infinity: none)."""
    ended = {e.op: e.time for e in events if e.f == "request" and e.type != "invoke"}
    return [(e, ended.get(e.op, float("inf"))) for e in events
            if e.f == "request" and e.type == "invoke"]


def _jumps_while_running(drawn: Sequence[StepRecord[Action]], events: Sequence[Event],
                         keys: Collection[str] | None,
                         ) -> Iterator[tuple[StepRecord[Action], Clock, list[Event]]]:
    """Each drawn jump made while a request of ``keys`` ran (any request's, without ``keys``),
    with the invocations of the requests running through it."""
    flights = [(invoke, end) for invoke, end in _flights(events)
               if keys is None or describe_identity((invoke.tenant, invoke.key)) in keys]
    for step in drawn:
        if not isinstance(step.action, Clock):
            continue
        jump = next((e for e in events[step.first_event:step.last_event] if e.f == "clock"),
                    None)
        if jump is None:
            continue
        running = [invoke for invoke, end in flights if invoke.time < jump.time < end]
        if running:
            yield step, step.action, running


def _drawn(steps: Sequence[StepRecord[Action]]) -> list[StepRecord[Action]]:
    return [s for s in steps if not s.settle and s.action is not None]


def without_the_jumps(steps: Sequence[StepRecord[Action]], events: Sequence[Event], *,
                      keys: Collection[str] | None = None) -> list[Action]:
    """The story of ``steps`` (as recorded in ``events``) with the jumps made while a request
    of ``keys`` ran left out, every other step as drawn: a property it still breaks was not
    broken by those jumps.  Only the clock changes, not the order things met in: where the
    requests a jump ran through had answered before the next step, the jump's place waits
    for their answers (key-only's slowed request, a jump, and a retry that got its 200 after
    the original's 201: without that wait the retry met the original running, got 409, and
    the finding waited out a 30 s lease in real time to be confirmed)."""
    drawn = _drawn(steps)
    ended = {invoke.index: end for invoke, end in _flights(events)}
    actions: dict[int, Action | None] = {s.number: s.action for s in drawn}
    for step, _, running in _jumps_while_running(drawn, events, keys):
        after = next((s for s in drawn if s.number > step.number), None)
        answered_before = (after is not None and after.first_event < len(events)
                           and all(ended[invoke.index] < events[after.first_event].time
                                   for invoke in running))
        actions[step.number] = (AwaitAnswers(why="a jump left out: the requests it ran "
                                                 "through had answered by the next step")
                                if answered_before else None)
    return [a for a in actions.values() if a is not None]


def in_real_time(steps: Sequence[StepRecord[Action]], events: Sequence[Event], *,
                 lease: float | None = None,
                 keys: Collection[str] | None = None) -> RealTimeStory[Action]:
    """The story of ``steps`` (as recorded in ``events``) with every jump made while a request
    of ``keys`` ran (any request, without ``keys``) turned into a wait (one too long to wait,
    into a wait just past the target's ``lease`` where that is short enough), and the slowed
    requests running through it slowed as much more.  A jump made while only other keys'
    requests ran stays a jump: no timer of the finding's key was running then."""
    drawn = _drawn(steps)
    actions: dict[int, Action] = {s.number: s.action for s in drawn if s.action is not None}
    waits = 0.0
    for step, jump, running in _jumps_while_running(drawn, events, keys):
        seconds = jump.seconds
        why = f"{jump.why}, in real time" if jump.why else "in real time"
        if seconds > REAL_TIME_LIMIT and lease is not None and (
                lease + PAST_THE_LEASE <= REAL_TIME_LIMIT):
            why = (f"past the lease of the running request, in real time (the jump was "
                   f"{seconds:g} s)")
            seconds = lease + PAST_THE_LEASE
        elif seconds > REAL_TIME_LIMIT:
            return RealTimeStory(None, why=(
                f"step {step.number} moves the clock {seconds:g} s while a request runs, longer "
                f"than the {REAL_TIME_LIMIT:g} s the harness waits in real time"))
        actions[step.number] = Wait(seconds=seconds, why=why)
        waits += seconds
        for invoke in running:
            owner = next((s for s in drawn if s.holds(invoke.index)), None)
            if owner is not None and isinstance(owner.action, Slow):
                slowed = actions[owner.number]
                assert isinstance(slowed, Slow)
                actions[owner.number] = slowed.model_copy(
                    update={"delay_ms": slowed.delay_ms + int(seconds * 1000)})
    return RealTimeStory([actions[s.number] for s in drawn], waits)

"""What every example of one exploration shares, whatever the target: counts, shortest story.

The counts the report needs and the shortest failing story seen so far, for one exploration (or
one replay).  The HTTP session (``_session.Session``) and the queue consumer's
(``consumer._session.ConsumerSession``) are this bookkeeping plus how each starts a world on its
deployment.

Findings are data, but Hypothesis learns that an example failed only from an exception, so a
finding becomes a ``StoryFailed`` for as long as Hypothesis needs it and data again afterwards:
the session keeps each failing world's steps, history and verdict, and the explorer reports the
shortest of them.  The exception's class names the property that broke first (``P1Broken``...),
because Hypothesis tells failures apart by class: it shrinks each broken property's story on
its own, rather than trading one for another on the way.
"""

from __future__ import annotations

import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

from hypothesis import reject

from harness._errors import HarnessError
from harness._history import Event, History
from harness._interrupts import raise_if_interrupted
from harness._outcomes import Handler, RunEvent
from harness.explore._distinct import Kind, kinds_of
from harness.explore._failure import Failure
from harness.explore._real_time import (
    MAX_CONFIRMATIONS,
    TELLINGS_PER_PROPERTY,
    TELLINGS_WITHOUT_JUMPS,
    RealTimeStory,
)
from harness.explore._steps import A, StepRecord
from harness.judging._checker import MOVED_CLOCK, PROPERTIES, CheckResult
from harness.judging._findings import Finding, Note

__all__ = ["ConfirmedLate", "Decisions", "Ledger", "StoryFailed", "StorySession", "StoryWorld",
           "TargetLost", "emitter"]


def emitter(handlers: Sequence[Handler]) -> Callable[[RunEvent], None]:
    """Tell every handler each run event, in order."""

    def emit(event: RunEvent) -> None:
        for handler in handlers:
            handler.handle(event)

    return emit


class TargetLost(KeyboardInterrupt):
    """The target cannot be brought back for the next example: the exploration cannot go on.
    A ``KeyboardInterrupt`` so that Hypothesis lets it through at once (an ordinary error would
    be taken for the example's failure and replayed); the explorer raises ``error`` again."""

    def __init__(self, error: HarnessError) -> None:
        super().__init__(str(error))
        self.error = error


class ConfirmedLate(KeyboardInterrupt):
    """A story told in real time some examples after a moved clock showed its finding broke
    the property again.  It is not Hypothesis's current example, so Hypothesis cannot shrink
    it: this stops Hypothesis at once (a ``KeyboardInterrupt`` it lets through), and the
    explorer drops steps from the story instead."""


class StoryFailed(Exception):
    """Raised inside Hypothesis when a story fails, so that it shrinks the story.  Not a
    ``HarnessError``: it never leaves the explorer."""


#: One class per kind a story is hunted for (``_broken``), made when first needed.
_BROKEN: dict[str, type[StoryFailed]] = {}


def _broken(failure: Failure[Any]) -> type[StoryFailed]:
    """The exception class for ``failure``: one per property and mechanism it is kept for, so
    that Hypothesis, which tells failures apart by class, shrinks each kind on its own."""
    if not failure.new:
        return StoryFailed
    kind = min(failure.new, key=lambda k: (int(k.property[1:]), k.mechanism))
    name = f"{kind.property}Broken[{kind.mechanism}]"
    if name not in _BROKEN:
        _BROKEN[name] = type(name, (StoryFailed,), {"__doc__": f"A story broke {name}."})
    return _BROKEN[name]


@dataclass
class Ledger:
    """What one exploration has kept, shared by every session it makes (drawing, dropping
    steps; each of several searches at once): the kinds its kept failures show, whose variants
    fail no example any more, and failures of new kinds met while another was hunted, each
    waiting for its own turn."""

    known: set[Kind] = field(default_factory=set)
    aside: list[Failure[Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def new_kinds(self, findings: Sequence[Finding],
                  doubted: Sequence[Finding] = ()) -> frozenset[Kind]:
        """The kinds ``findings`` show (their keys' causes told by the ``doubted`` ones too)
        that no kept failure shows."""
        with self._lock:
            return kinds_of(findings, doubted) - self.known

    def set_aside(self, failure: Failure[Any]) -> None:
        """Keep ``failure`` for later, unless a failure set aside already shows its new kinds
        in fewer steps."""
        with self._lock:
            for n, other in enumerate(self.aside):
                if other.new == failure.new:
                    if failure.operations < other.operations:
                        self.aside[n] = failure
                    return
            self.aside.append(failure)

    def next_aside(self) -> Failure[Any] | None:
        """The next failure set aside that still shows a kind no kept failure shows."""
        with self._lock:
            while self.aside:
                failure = self.aside.pop(0)
                fresh = failure.new - self.known
                if fresh:
                    return replace(failure, new=fresh)
            return None

    def keep(self, failure: Failure[Any]) -> bool:
        """Keep ``failure``'s kinds; False if another search kept them all meanwhile."""
        with self._lock:
            fresh = (failure.new or failure.kinds) - self.known
            self.known |= failure.kinds | failure.new
            return bool(fresh) or not (failure.new or failure.kinds)


@dataclass
class Decisions:
    """What the examples decided: each example the checker could not decide counts as not run
    (as Hypothesis treats an example that fails ``assume``), with its reasons; only the
    properties of an example that decided everything, and that it gave something to judge
    (``CheckResult.exercised``), count as decided.  ``doubt`` says when that is no pass."""

    judged: int = 0
    undecided: list[tuple[int, list[str]]] = field(default_factory=list)
    decided: set[str] = field(default_factory=set)
    in_doubt: dict[str, str] = field(default_factory=dict)

    def count(self, example: int, result: CheckResult) -> bool:
        """Count ``example``'s verdicts; whether the checker could not decide it."""
        self.judged += 1
        doubts = {pid: r.reason or "no reason was recorded"
                  for pid, r in result.results.items() if r.verdict == "unknown"}
        if doubts:
            self.undecided.append((example, [f"{p}: {why}" for p, why in doubts.items()]))
            for pid, why in doubts.items():
                self.in_doubt.setdefault(pid, why)
            return True
        self.decided |= {pid for pid, r in result.results.items()
                         if r.verdict in ("pass", "fail") and pid in result.exercised}
        return False

    def doubt(self) -> str | None:
        """Why the examples cannot make a pass (None: they can): those the checker could not
        decide are the majority, or a property one of them left undecided was decided by no
        example."""
        if not self.undecided:
            return None
        count = len(self.undecided)
        if 2 * count > self.judged:
            reasons = sorted({r for _, rs in self.undecided for r in rs})
            return (f"{count} of {self.judged} examples could not be judged: "
                    + "; ".join(reasons[:3]))
        never = sorted(set(self.in_doubt) - self.decided, key=lambda p: int(p[1:]))
        if never:
            return (f"no example decided {', '.join(never)}: "
                    + "; ".join(f"{p}: {self.in_doubt[p]}" for p in never[:3]))
        return None

    def not_run(self) -> list[Note]:
        """The examples counted as not run, each with why, for the report."""
        return [Note(reasons[0].split(":", 1)[0], None,
                     f"example {number} counted as not run (the checker could not decide it): "
                     + "; ".join(reasons), {"not_run": True, "example": number})
                for number, reasons in self.undecided]

    @classmethod
    def merged(cls, parts: Sequence[Decisions]) -> Decisions:
        """Several searches' decisions as one exploration's."""
        total = cls()
        for part in parts:
            total.judged += part.judged
            total.undecided += part.undecided
            total.decided |= part.decided
            for pid, why in part.in_doubt.items():
                total.in_doubt.setdefault(pid, why)
        return total


class StoryWorld(Protocol[A]):
    """One example's world, as the session drives it: it performs actions, records them as
    steps in its history, and hands that history to the checker.  It never judges."""

    steps: list[StepRecord[A]]
    history: History
    failure: Failure[A] | None
    #: Findings seen only with a moved clock, kept for the real-time telling at the end.
    doubted: list[Finding]

    def step(self, action: A) -> StepRecord[A]: ...

    def observe(self, *, every_key: bool = False) -> tuple[Event, ...]: ...

    def judge(self, events: Sequence[Event],
              properties: Sequence[str] | None = None) -> CheckResult: ...

    def settle(self) -> None: ...

    def close(self) -> None: ...


W = TypeVar("W", bound=StoryWorld[Any])


def _operations(steps: Sequence[StepRecord[Any]]) -> int:
    """The drawn steps among ``steps`` (settling is derived, not drawn)."""
    return sum(1 for s in steps if not s.settle)


def _through_the_evidence(steps: Sequence[StepRecord[A]],
                          findings: Sequence[Finding]) -> Sequence[StepRecord[A]]:
    """The story up to the last step that wrote an event ``findings`` cite: the steps after it
    came once they were made, and a telling to confirm them need not wait for those."""
    cited = max((i for f in findings for i in f.events), default=None)
    last = next((n for n, s in enumerate(steps) if cited is not None and s.holds(cited)), None)
    return steps if last is None else steps[:last + 1]


class StorySession(ABC, Generic[A, W]):
    """Starts each example's world and keeps what the report needs: the shortest failure, the
    counts, and every example's history (``kept``), so a run in which nothing failed still
    shows what it sent.

    A session hunts one failure at a time (``hunt``): the first story that shows a kind
    (``_distinct``) the ``ledger`` does not know sets what is hunted, and only stories that
    show one of those kinds fail an example from then on (Hypothesis shrinks them); a story of
    another new kind met meanwhile is set aside in the ledger for its own turn, and one whose
    kinds are all known (a variant of a kept failure) fails nothing.

    ``phase`` is ``drawing`` until the hunt's first failure, then ``shrinking``
    (``minimising`` for the session that drops steps); ``progress`` hears it and the example
    count as each example starts, and ``enough``, asked at the same moment, may stop the
    search (it raises).

    A finding seen only with a moved clock (``CheckResult.unconfirmed``) fails no example by
    itself: at the example's end the story is told again without the jumps it needs
    (``without_the_jumps``: a finding it still makes was not the jumps' doing), else in real
    time (``retold``), and only if the same property breaks then does it count.  Once a
    property is confirmed so, stories that break it with a moved clock count as failures while
    Hypothesis shrinks them (``Failure.moved_clock``); the explorer confirms the shortest the
    same way at the end.
    ``trust_moved_clock`` counts them at once, as the user may ask.

    A front end says which properties are judged after every step (``step_properties``; the
    rest only once the story has settled), the fewest steps a story can break each property
    in (``fewest_steps``, for ``_minimise``), and what keeps a list of actions from running
    (``problems_with``)."""

    step_properties: tuple[str, ...] = ()
    fewest_steps: Mapping[str, int] = {}

    def __init__(self, deployment: Any, *, retry_horizon: float,
                 listener: Callable[[Event], None] | None = None,
                 progress: Callable[[str, int], None] | None = None,
                 phase: str = "drawing", trust_moved_clock: bool = False,
                 confirm: bool = True) -> None:
        #: The one deployment every example shares (a front end's subclass names its type).
        self.deployment = deployment
        self.target = deployment.target
        self.retry_horizon = retry_horizon
        self.listener = listener  # sees every event of every example (progress)
        self.progress = progress
        self.enough: Callable[[StorySession[A, W]], None] | None = None
        self.phase = phase
        self.trust_moved_clock = trust_moved_clock
        self.confirm = confirm
        self.started = time.monotonic()
        self.examples = 0
        self.steps = 0  # drawn steps performed, over every example
        self.improved_at = 0  # the example that last made the shortest story shorter
        #: The exploration's first failure (examples, seconds), whatever was hunted.
        self.first_failure: tuple[int, float] | None = None
        #: The kept failures' kinds and the failures set aside, shared with the sessions
        #: that shorten them.
        self.ledger = Ledger()
        #: The kinds this hunt shrinks (None: the next new kind sets them).
        self.hunted: frozenset[Kind] | None = None
        self.hunt_started = self.started
        #: The hunt's first failure (examples, seconds since the hunt started).
        self.hunt_found: tuple[int, float] | None = None
        #: Examples begun while drawing (not shrinking, not told again): the budget's count.
        self.drawn = 0
        #: Kinds a story told in real time broke again: a moved clock's story of one of them
        #: fails an example at once (``_judged``).
        self.confirmed_kinds: set[Kind] = set()
        #: When a moved clock first showed a finding before any story failed (examples,
        #: seconds): the first failure, had the moved clock been trusted, before the
        #: real-time telling confirmed it.
        self.first_sighting: tuple[int, float] | None = None
        self.best: Failure[A] | None = None
        #: What the examples decided, and which the checker could not (``Decisions``).
        self.decisions = Decisions()
        #: Hypothesis draws these examples: one the checker could not decide is rejected, so
        #: another is drawn in its place (the explorer sets it around Hypothesis's searches).
        self.rejecting = False
        #: How many more undecided examples may be drawn again (the explorer sets it).
        self.replacements = 0
        self._undecided_example = False
        self.kept: list[Event] = []
        #: What the checker tallied for each settled example (a queue consumer's account).
        self.summaries: list[dict[str, Any]] = []
        #: A story that failed in real time after a moved clock first showed its property.
        self.confirmed: Failure[A] | None = None
        self.confirmations = 0
        self._tellings: dict[str, int] = {}  # stories told in real time, per property
        self._unjumped: dict[str, int] = {}  # stories told without their jumps, per property
        self._telling = False  # a story is being told again: its own sightings are not
        #: The example whose story stopped at a sighting, to be told again at its end.
        self._cut_short: W | None = None
        #: While drawing, how many more examples a story waits before it is told in real
        #: time (0: at once); the explorer's drawing session sets it (``DEFER_REAL_TIME``).
        self.defer_real_time = 0
        #: Stories waiting for their real-time telling, with the example that made each.
        self._pending: list[tuple[int, W]] = []
        #: Findings seen only with a moved clock and not confirmed, in words for the report.
        self.moved_clock: list[Note] = []
        #: Operations the explorer could not draw for this target, and why.
        self.not_drawn: dict[str, str] = {}
        self._failures = 0
        self._began = 0.0
        self._next_op = 0

    # ---- what a front end provides ---------------------------------------------------------

    @abstractmethod
    def _new_world(self) -> W:
        """A fresh world on the shared deployment (fresh keys, an empty history), the
        deployment brought back first if an earlier example left it down."""

    @abstractmethod
    def problems_with(self, actions: Sequence[A]) -> list[str]:
        """Everything that keeps ``actions`` from running, in this order, on this target."""

    def retold(self, steps: Sequence[StepRecord[A]],
               events: Sequence[Event],
               doubted: Sequence[Finding]) -> RealTimeStory[A]:
        """The story with real time in place of the jumps the ``doubted`` findings need (None
        actions: it cannot be told so, ``why`` says why)."""
        return RealTimeStory(None, why="this front end cannot tell a story in real time")

    def without_the_jumps(self, steps: Sequence[StepRecord[A]], events: Sequence[Event],
                          doubted: Sequence[Finding]) -> list[A] | None:
        """``steps`` without the jumps the ``doubted`` findings need (None: a front end that
        cannot leave them out)."""
        return None

    def told_in_vain(self, told: W) -> str:
        """Why a story told again in real time did not break the doubted properties (a front
        end adds what kept the telling from happening as drawn)."""
        return "the story told again in real time did not break it"

    # ---- examples ----------------------------------------------------------------------------

    def begin(self) -> W:
        """A fresh world for the next example (fresh keys, fresh tenants, empty history)."""
        raise_if_interrupted()
        if self.enough is not None:
            self.enough(self)
        self.examples += 1
        if self.phase == "drawing":
            self.drawn += 1
        if self.progress is not None:
            self.progress(self.phase, self.examples)
        return self._world()

    def hunt(self, kinds: frozenset[Kind] | None = None) -> None:
        """Start hunting the next failure: of ``kinds`` (a failure set aside, shortened), or
        of whatever new kind a story shows first (None)."""
        self.hunted = kinds
        self.best = None
        self.hunt_found = None
        self.hunt_started = time.monotonic()
        self.improved_at = self.examples
        if self.phase == "shrinking":
            self.phase = "drawing"

    def _world(self) -> W:
        try:
            world = self._new_world()
        except HarnessError as exc:
            raise TargetLost(exc) from exc
        # when the world's history began, on the session's clock: its events are timed from
        # there (a world that reads the target as it starts began a few ms before it returned,
        # and kept examples timed from its return overlapped the next one's first events)
        self._began = time.monotonic() - self.started - world.history.now()
        if self.listener is not None:
            world.history.subscribe(self.listener)
        return world

    def _keep(self, world: W) -> None:
        """Append the example's history to ``kept``, numbered on from the examples before it
        and timed from the session's start, so all of them read as one history."""
        index, op = len(self.kept), self._next_op
        events = world.history.events()
        self.kept += [replace(e, index=index + e.index, op=op + e.op, time=self._began + e.time)
                      for e in events]
        self._next_op += max((e.op for e in events), default=-1) + 1
        self.steps += sum(1 for s in world.steps if not s.settle)

    def play(self, actions: Sequence[A]) -> W:
        """Run a fixed story (a replay, a shorter candidate) exactly as an example runs."""
        return self._play(self.begin(), actions)

    def _play(self, world: W, actions: Sequence[A]) -> W:
        try:
            for action in actions:
                self.act(world, action)
                self.check_step(world)
            self.finish(world)
        except StoryFailed:
            pass  # the world keeps its failure
        return world

    def act(self, world: W, action: A) -> None:
        """Perform a drawn action, unless the story already failed (then its values are still
        drawn, so every run of the same example draws the same data however the target
        answered, and Hypothesis can replay it)."""
        raise_if_interrupted()
        if world.failure is not None or world is self._cut_short:
            return
        try:
            world.step(action)
        except HarnessError as exc:
            self._fail(world, None, (), broke_at=len(world.steps),
                       error=f"the harness could not perform step {len(world.steps)}: {exc}")

    def check_step(self, world: W) -> None:
        """The invariant: the checker over the history so far, effects collected first."""
        if world.failure is not None or not world.steps or world is self._cut_short:
            return
        events = world.observe()
        result = world.judge(events, self.step_properties)
        self._judged(world, result, self.step_properties, events,
                     broke_at=world.steps[-1].number)

    def finish(self, world: W) -> None:
        """The end of an example: settle, judge every property, confirm in real time what only
        a moved clock showed, leave the deployment clean, and tell Hypothesis if the story
        failed."""
        self._undecided_example = False
        try:
            if world.failure is None:
                self._settle_and_judge(world)
        finally:
            world.close()
            self._keep(world)
            self._cut_short = None
        if world.failure is None and world.doubted and not self._telling:
            self._confirm(world)
        failure = world.failure
        if failure is not None and self._hunting(failure):
            findings = failure.failing_findings
            raise _broken(failure)(failure.error or "; ".join(f.message for f in findings))
        if self.phase == "drawing" and not self._telling and self.tell_pending(
                lambda made: self.examples - made >= self.defer_real_time):
            raise ConfirmedLate("a story told in real time broke its property again")
        if (self.rejecting and self._undecided_example and not self._telling
                and self.replacements > 0
                and sys.exc_info()[1] is None):  # not while Hypothesis stops the example
            self.replacements -= 1
            if self.phase == "drawing":
                self.drawn -= 1  # not run: it takes no example of the budget
            reject()  # Hypothesis draws another in its place, as for a failed ``assume``

    def _settle_and_judge(self, world: W) -> None:
        try:
            world.settle()
        except HarnessError as exc:
            self._fail(world, None, (), broke_at=None,
                       error=f"the harness could not settle the story: {exc}")
            return
        events = world.observe(every_key=True)
        result = world.judge(events)
        if result.summary:
            self.summaries.append(result.summary)
        self._judged(world, result, tuple(PROPERTIES.ids()), events, broke_at=None)
        self._undecided_example = (world.failure is None
                                   and self.decisions.count(self.examples, result))

    def _hunting(self, failure: Failure[A]) -> bool:
        """Is ``failure`` of the kinds this hunt shrinks (a harness error always is)?"""
        return self.hunted is None or not failure.new or bool(failure.new & self.hunted)

    def _judged(self, world: W, result: CheckResult, properties: tuple[str, ...],
                events: Sequence[Event], *, broke_at: int | None) -> None:
        """A verdict on the story so far: a finding of a kind no kept failure shows fails it
        (kinds already kept are variants, and the story goes on); a finding seen only with a
        moved clock fails it only for a kind already confirmed, and is otherwise kept for the
        telling at the example's end.  If it will be told, the example performs no more
        steps: they came after the finding, and would only delay its telling."""
        if self.ledger.new_kinds(result.findings, result.unconfirmed):
            self._fail(world, result, properties, events, broke_at=broke_at)
            return
        doubted = [f for f in result.unconfirmed if self.ledger.new_kinds([f])]
        if not doubted:
            return
        if kinds_of(doubted) & self.confirmed_kinds:
            self._fail(world, replace(result, unconfirmed=doubted), properties, events,
                       broke_at=broke_at, moved_clock=True)
        elif not world.doubted:
            world.doubted = doubted
            if self.first_sighting is None and self.first_failure is None:
                self.first_sighting = (self.examples, time.monotonic() - self.started)
            if not self._telling and self._will_tell(world):
                self._cut_short = world

    def _confirm(self, world: W) -> None:
        """Tell the story, up to its doubted findings' last evidence, again without its jumps
        made while requests ran, else with real waits in their place: if one of the doubted
        properties breaks again, the story fails; if not, or if it cannot be told so, each
        doubted finding is reported as seen only with a moved clock."""
        doubted = {f.property for f in world.doubted}
        unjumped = self._unjumped_stories(world)
        if unjumped:
            for prop in doubted:
                self._unjumped[prop] = self._unjumped.get(prop, 0) + 1
        for actions in unjumped:
            if self._broke_again(world, self._tell(actions), doubted):
                return
        if self.phase == "drawing" and self.defer_real_time:
            self._pending.append((self.examples, world))
        else:
            self._in_real_time(world)

    def tell_pending(self, due: Callable[[int], bool] = lambda made: True) -> bool:
        """Tell in real time the waiting stories that are ``due`` (by the example that made
        each; all, by default); whether one broke its property again (then the rest wait on,
        and ``best`` holds it)."""
        while self._pending and due(self._pending[0][0]):
            _, world = self._pending.pop(0)
            if not self.ledger.new_kinds(world.doubted):
                continue  # a kept failure shows its kinds already: nothing to confirm
            self._in_real_time(world)
            if world.failure is not None:
                return True
        return False

    def leave_pending(self, why: str) -> None:
        """Report the stories still waiting as seen only with a moved clock, untold (a
        failure that needs no moved clock came first: only a shorter story is worth the
        wait, and shrinking looks for it)."""
        for _, world in self._pending:
            self._not_confirmed(world, why)
        self._pending.clear()

    def _in_real_time(self, world: W) -> None:
        """Tell ``world``'s story with real waits in place of the jumps its doubted findings
        need; if it cannot be told so, or does not break them again, each is reported as seen
        only with a moved clock."""
        doubted = {f.property for f in world.doubted}
        story, why = self._real_time_story(world)
        if why is None:
            self.confirmations += 1
            for prop in doubted:
                self._tellings[prop] = self._tellings.get(prop, 0) + 1
            if self.progress is not None:
                self.progress("confirming in real time", self.examples)
            assert story.actions is not None
            told = self._tell(story.actions)
            if self._broke_again(world, told, doubted):
                return
            why = self.told_in_vain(told)
        self._not_confirmed(world, why)

    def _not_confirmed(self, world: W, why: str) -> None:
        for finding in world.doubted:
            self.moved_clock.append(Note(
                finding.property, finding.key,
                f"{MOVED_CLOCK}, not confirmed ({why}): {finding.message}",
                {"moved_clock": True, "finding": finding.to_json()}))

    def _will_tell(self, world: W) -> bool:
        """Whether ``world``'s doubted findings will be told again at its end."""
        return bool(self._unjumped_stories(world)) or self._real_time_story(world)[1] is None

    def _unjumped_stories(self, world: W) -> list[list[A]]:
        """``world``'s story without the jumps its doubted findings need: the steps they cite
        alone (short, and the likeliest to break), then the story up to their last evidence;
        each only if it can run and could be the shortest failure yet, and for at most
        ``TELLINGS_WITHOUT_JUMPS`` examples per property."""
        doubted = {f.property for f in world.doubted}
        if not self.confirm or all(
                self._unjumped.get(p, 0) >= TELLINGS_WITHOUT_JUMPS for p in doubted):
            return []
        return [actions for actions in self._without_the_jumps(
            world.steps, world.history.events(), world.doubted)
            if not self._no_shorter(len(actions))]

    def _without_the_jumps(self, steps: Sequence[StepRecord[A]], events: Sequence[Event],
                           findings: Sequence[Finding]) -> list[list[A]]:
        """The stories that tell ``findings`` without the jumps they need: the steps they cite
        alone, then the story up to their last evidence (each once, if it can run)."""
        cited = {i for f in findings for i in f.events}
        stories: list[list[A]] = []
        for part in ([s for s in steps if any(s.holds(i) for i in cited)],
                     _through_the_evidence(steps, findings)):
            actions = self.without_the_jumps(part, events, findings)
            if actions and actions not in stories and not self.problems_with(actions):
                stories.append(actions)
        return stories

    def _real_time_story(self, world: W) -> tuple[RealTimeStory[A], str | None]:
        """``world``'s story up to its doubted findings' last evidence, in real time, and why
        it is not told so (None: it is)."""
        steps = _through_the_evidence(world.steps, world.doubted)
        story = self.retold(steps, world.history.events(), world.doubted)
        return story, self._why_not_told({f.property for f in world.doubted}, story,
                                         _operations(steps))

    def _broke_again(self, world: W, told: W, doubted: set[str]) -> bool:
        """Whether ``told`` (a telling of ``world``'s story that no jump made while a request
        ran can have fooled) broke one of the ``doubted`` properties; if so, ``world``'s story
        fails for it and ``told`` is the confirmed one."""
        failure = told.failure
        if (failure is None or failure.moved_clock
                or not doubted & {f.property for f in failure.failing_findings}):
            return False
        self.confirmed = failure
        self.confirmed_kinds |= failure.kinds
        self._fail(world, None, tuple(PROPERTIES.ids()), world.history.events(), broke_at=None,
                   moved_clock=True, doubted=world.doubted)
        return True

    def _tell(self, actions: Sequence[A]) -> W:
        """A story told again, on a world of its own; what a moved clock alone shows in it is
        not told again in turn."""
        self._telling = True
        try:
            return self._play(self._world(), actions)
        finally:
            self._telling = False

    def _no_shorter(self, operations: int) -> bool:
        """Whether a story of ``operations`` drawn steps could not be the shortest failure."""
        best = self.best
        return best is not None and best.check is not None and operations >= best.operations

    def _why_not_told(self, doubted: set[str], story: RealTimeStory[A],
                      operations: int) -> str | None:
        """Why ``story`` (of ``operations`` drawn steps) is not told in real time (None: it
        is).  Each telling costs its waits, so an exploration tells at most
        ``MAX_CONFIRMATIONS`` stories, and at most ``TELLINGS_PER_PROPERTY`` for one property:
        a story real time did not break may still have a sibling it does (a busy machine times
        the first out, or its jump was not the one that mattered), but not every story of a
        property a jump alone breaks.  Once a story failed, only a shorter one is worth the
        wait: shrinking looks for nothing else (on a busy machine key-only's shrinking waited
        out a 90 s jump, for a story no shorter than the one it had)."""
        if story.actions is None:
            return story.why
        if not self.confirm:
            return "real-time confirmation is off"
        if self._no_shorter(operations):
            return "a story as short already failed"
        if self.confirmations >= MAX_CONFIRMATIONS:
            return "the exploration already confirmed as many stories in real time as it may"
        if all(self._tellings.get(p, 0) >= TELLINGS_PER_PROPERTY for p in doubted):
            return (f"{TELLINGS_PER_PROPERTY} stories that broke it only with a moved clock were "
                    f"told in real time before, in vain")
        return None

    def _fail(self, world: W, result: CheckResult | None, properties: tuple[str, ...],
              events: Sequence[Event] = (), *, broke_at: int | None,
              error: str | None = None, moved_clock: bool = False,
              doubted: Sequence[Finding] = ()) -> None:
        """Keep the failing story as it stands now; the steps drawn after it change nothing."""
        self._failures += 1
        if result is None and doubted:
            result = CheckResult({}, [], [], list(doubted))
        failure = Failure(tuple(world.steps), tuple(events) or world.history.events(), result,
                          properties, broke_at, error, self._failures, moved_clock)
        failure = replace(failure, new=failure.kinds - self.ledger.known)
        world.failure = failure
        if self.hunted is None:
            self.hunted = failure.new
        if not self._hunting(failure):
            self.ledger.set_aside(failure)  # its own turn comes once this hunt is over
            return
        now = time.monotonic()
        if self.first_failure is None:
            self.first_failure = (self.examples, now - self.started)
        if self.hunt_found is None:
            self.hunt_found = (self.examples, now - self.hunt_started)
            if self.phase == "drawing":
                self.phase = "shrinking"
        if self.best is None or failure.operations < self.best.operations:
            self.improved_at = self.examples
        if self.best is None or failure.rank < self.best.rank:
            self.best = failure

    def reportable(self, best: Failure[A] | None) -> Failure[A] | None:
        """The failure to report: ``best``, told without its jumps or else in real time when
        only a moved clock showed it (else the story first confirmed so)."""
        if best is None or not best.moved_clock:
            return best
        if self.confirmed is not None and best.operations >= self.confirmed.operations:
            return self.confirmed  # the story already confirmed is as short
        unjumped = self._without_the_jumps(best.steps, best.events, best.failing_findings)
        story = self.retold(best.steps, best.events, best.failing_findings)
        for actions in [*unjumped, story.actions]:
            if actions is None:
                continue
            told = self._tell(actions).failure
            if told is not None and not told.moved_clock and told.shows(best.new or best.kinds):
                return told
        return self.confirmed

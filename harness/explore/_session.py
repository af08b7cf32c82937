"""What every example of one exploration (or one replay) shares: the running deployment, the
counts the report needs, and the shortest failing story seen so far.

Findings are data, but Hypothesis learns that an example failed only from an exception, so a
finding becomes a ``StoryFailed`` for as long as Hypothesis needs it and data again afterwards:
the session keeps each failing world's steps, history and verdict, and the explorer reports the
shortest of them.  The exception's class names the property that broke first (``P1Broken``...),
because Hypothesis tells failures apart by class: it shrinks each broken property's story on
its own, rather than trading one for another on the way.

``deployed`` and ``emitter`` are what an exploration and a replay both do around their session:
start the one deployment, and tell the report handlers each run event, as ``run`` does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path

from harness._checker import MOVED_CLOCK, PROPERTIES, CheckResult
from harness._deployment import Deployment
from harness._errors import HarnessError
from harness._findings import Finding, Note
from harness._history import Event
from harness._outcomes import Handler, RunEvent
from harness._paths import state_dir
from harness._target import Target
from harness._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.explore._actions import Action
from harness.explore._failure import Failure
from harness.explore._real_time import MAX_CONFIRMATIONS, in_real_time
from harness.explore._world import World

__all__ = ["AT_THE_END", "STEP_PROPERTIES", "Session", "StoryFailed", "TargetLost", "deployed",
           "emitter"]

#: Judged only once the story's clients have settled: "retries after a crash converge" cannot
#: be judged while a client is still retrying.
AT_THE_END = frozenset({"P9"})
#: Judged after every step: a breach there is a breach whatever happens next.
STEP_PROPERTIES = tuple(p for p in PROPERTIES.ids() if p not in AT_THE_END)


def emitter(handlers: Sequence[Handler]) -> Callable[[RunEvent], None]:
    """Tell every handler each run event, in order."""

    def emit(event: RunEvent) -> None:
        for handler in handlers:
            handler.handle(event)

    return emit


@contextmanager
def deployed(target: Target, *, command: str, started_at: str, report_dir: Path | None,
             allow_remote: bool, toxiproxy: ToxiproxyServer | None) -> Iterator[Deployment]:
    """The one deployment an exploration or a replay shares between its examples: the target
    behind Toxiproxy (``toxiproxy`` when shared with other runs, else one started with its log
    beside the target's), its files in the report directory or, without one, under the state
    directory (``command``/``started_at``)."""
    workdir = (report_dir or state_dir() / command / started_at.replace(":", "")) / "target"
    toxiproxy_context = (nullcontext(toxiproxy) if toxiproxy is not None
                         else start_toxiproxy(log_dir=workdir))
    with toxiproxy_context as server, Deployment(
        target, toxiproxy=server, workdir=workdir, allow_remote=allow_remote,
    ) as deployment:
        yield deployment


class TargetLost(KeyboardInterrupt):
    """The target cannot be brought back for the next example: the exploration cannot go on.
    A ``KeyboardInterrupt`` so that Hypothesis lets it through at once (an ordinary error would
    be taken for the example's failure and replayed); the explorer raises ``error`` again."""

    def __init__(self, error: HarnessError) -> None:
        super().__init__(str(error))
        self.error = error


class StoryFailed(Exception):
    """Raised inside Hypothesis when a story fails, so that it shrinks the story.  Not a
    ``HarnessError``: it never leaves the explorer."""


#: One class per property, for the property a story breaks first (safety first).
_BROKEN: dict[str, type[StoryFailed]] = {
    pid: type(f"{pid}Broken", (StoryFailed,), {"__doc__": f"A story broke {pid}."})
    for pid in PROPERTIES.ids()
}


class Session:
    """Starts each example's world on the shared deployment and keeps what the report needs:
    the shortest failure, the counts, and every example's history (``kept``), so a run in
    which nothing failed still shows what it sent.

    ``phase`` is ``drawing`` until the first failure, then ``shrinking`` (``minimising`` for
    the session that drops steps); ``progress`` hears it and the example count as each example
    starts, and ``enough``, asked at the same moment, may stop the search (it raises).

    A finding seen only with a moved clock (``CheckResult.unconfirmed``) fails no example by
    itself: at the example's end the story is told again in real time (``_real_time``), and
    only if the same property breaks then does it count.  Once a property is confirmed so,
    stories that break it with a moved clock count as failures while Hypothesis shrinks them
    (``Failure.moved_clock``); the explorer confirms the shortest in real time at the end.
    ``trust_moved_clock`` counts them at once, as the user may ask."""

    def __init__(self, deployment: Deployment, *, retry_horizon: float,
                 listener: Callable[[Event], None] | None = None,
                 progress: Callable[[str, int], None] | None = None,
                 phase: str = "drawing", trust_moved_clock: bool = False,
                 confirm: bool = True) -> None:
        self.deployment = deployment
        self.listener = listener  # sees every event of every example (progress)
        self.progress = progress
        self.enough: Callable[[Session], None] | None = None
        self.phase = phase
        self.target = deployment.target
        self.retry_horizon = retry_horizon
        self.trust_moved_clock = trust_moved_clock
        self.confirm = confirm
        self.started = time.monotonic()
        self.examples = 0
        self.steps = 0  # drawn steps performed, over every example
        self.improved_at = 0  # the example that last made the shortest story shorter
        self.first_failure: tuple[int, float] | None = None
        self.best: Failure | None = None
        self.undecided: list[str] = []
        self.kept: list[Event] = []
        #: A story that failed in real time after a moved clock first showed its property.
        self.confirmed: Failure | None = None
        self.confirmations = 0
        self._not_confirmed: set[str] = set()  # properties real time did not confirm
        #: An ordinary request's latency, measured once (``measure_latency``): when a second
        #: request must leave to meet the first still running, on a target with no slow hook.
        self.latency_ms = 0
        #: The committed writes an ordinary charge makes (``measure_writes``).
        self.writes_per_charge = 0
        #: Findings seen only with a moved clock and not confirmed, in words for the report.
        self.moved_clock: list[Note] = []
        #: Operations the explorer could not draw for this target, and why.
        self.not_drawn: dict[str, str] = {}
        self._failures = 0
        self._began = 0.0
        self._next_op = 0

    def begin(self) -> World:
        """A fresh world for the next example (fresh keys, fresh tenants, empty history)."""
        if self.enough is not None:
            self.enough(self)
        self.examples += 1
        if self.progress is not None:
            self.progress(self.phase, self.examples)
        return self._world()

    def _world(self) -> World:
        try:
            self.deployment.restart_dead_instances()  # a crash may have left one down
        except HarnessError as exc:
            raise TargetLost(exc) from exc
        self._began = time.monotonic() - self.started
        world = World(self.deployment, retry_horizon=self.retry_horizon,
                      trust_moved_clock=self.trust_moved_clock)
        if self.listener is not None:
            world.history.subscribe(self.listener)
        return world

    def measure_latency(self) -> int:
        """Measure an ordinary request's latency (the median of a few, each with a fresh key,
        in a history of their own that no example keeps)."""
        world = self._world()
        try:
            self.latency_ms = int(world.context.measure_latency() * 1000)
        finally:
            world.close()
        return self.latency_ms

    def measure_writes(self) -> int:
        """Count the writes an ordinary charge commits, when the target's store proxy reads
        its protocol (a history of its own, kept by no example)."""
        if self.deployment.commit_proxy is None:
            return 0
        world = self._world()
        try:
            request = world.context.request(world.context.new_key(), label="learn-writes")
            answer, watch = world.context.send_watched(request)
            ok = answer.status is not None and 200 <= answer.status < 300
            self.writes_per_charge = len(watch.writes) if ok else 0
        finally:
            world.close()
        return self.writes_per_charge

    def _keep(self, world: World) -> None:
        """Append the example's history to ``kept``, numbered on from the examples before it
        and timed from the session's start, so all of them read as one history."""
        index, op = len(self.kept), self._next_op
        events = world.history.events()
        self.kept += [replace(e, index=index + e.index, op=op + e.op, time=self._began + e.time)
                      for e in events]
        self._next_op += max((e.op for e in events), default=-1) + 1
        self.steps += sum(1 for s in world.steps if not s.settle)

    def play(self, actions: Sequence[Action]) -> World:
        """Run a fixed story (a replay, a shorter candidate) exactly as an example runs."""
        return self._play(self.begin(), actions)

    def _play(self, world: World, actions: Sequence[Action]) -> World:
        try:
            for action in actions:
                self.act(world, action)
                self.check_step(world)
            self.finish(world)
        except StoryFailed:
            pass  # the world keeps its failure
        return world

    def act(self, world: World, action: Action) -> None:
        """Perform a drawn action, unless the story already failed (then its values are still
        drawn, so every run of the same example draws the same data however the target
        answered, and Hypothesis can replay it)."""
        if world.failure is not None:
            return
        try:
            world.step(action)
        except HarnessError as exc:
            self._fail(world, None, (), broke_at=len(world.steps),
                       error=f"the harness could not perform step {len(world.steps)}: {exc}")

    def check_step(self, world: World) -> None:
        """The invariant: the checker over the history so far, effects collected first."""
        if world.failure is not None or not world.steps:
            return
        events = world.observe()
        result = world.judge(events, STEP_PROPERTIES)
        self._judged(world, result, STEP_PROPERTIES, events, broke_at=world.steps[-1].number)

    def finish(self, world: World) -> None:
        """The end of an example: settle, judge every property, confirm in real time what only
        a moved clock showed, leave the deployment clean, and tell Hypothesis if the story
        failed."""
        try:
            if world.failure is None:
                self._settle_and_judge(world)
        finally:
            world.close()
            self._keep(world)
        if world.failure is None and world.doubted:
            self._confirm(world)
        failure = world.failure
        if failure is not None:
            findings = failure.failing_findings
            broken = _BROKEN[findings[0].property] if findings else StoryFailed
            raise broken(failure.error or "; ".join(f.message for f in findings))

    def _settle_and_judge(self, world: World) -> None:
        try:
            world.settle()
        except HarnessError as exc:
            self._fail(world, None, (), broke_at=None,
                       error=f"the harness could not settle the story: {exc}")
            return
        events = world.observe(every_key=True)
        result = world.judge(events)
        self._judged(world, result, tuple(PROPERTIES.ids()), events, broke_at=None)
        self.undecided += [f"{pid}: {r.reason}" for pid, r in result.results.items()
                           if r.verdict == "unknown" and r.reason]

    def _judged(self, world: World, result: CheckResult, properties: tuple[str, ...],
                events: Sequence[Event], *, broke_at: int | None) -> None:
        """A verdict on the story so far: a finding fails it; a finding seen only with a
        moved clock fails it only for a property already confirmed in real time, and is
        otherwise kept for the real-time telling at the example's end."""
        if result.findings:
            self._fail(world, result, properties, events, broke_at=broke_at)
            return
        if not result.unconfirmed:
            return
        confirmed = self.confirmed.broken if self.confirmed is not None else None
        if confirmed in {f.property for f in result.unconfirmed}:
            self._fail(world, result, properties, events, broke_at=broke_at, moved_clock=True)
        elif not world.doubted:
            world.doubted = list(result.unconfirmed)

    def _confirm(self, world: World) -> None:
        """Tell the story again with real waits in place of its jumps made while requests ran:
        if one of the doubted properties breaks again, the story fails; if not, or if it
        cannot be told in real time, each doubted finding is reported as seen only with a
        moved clock."""
        doubted = {f.property for f in world.doubted}
        story = in_real_time(world.steps, world.history.events())
        why = story.why
        tried = doubted <= self._not_confirmed  # each was told in real time before, in vain
        if (story.actions is not None and self.confirm and not tried
                and self.confirmations < MAX_CONFIRMATIONS):
            self.confirmations += 1
            if self.progress is not None:
                self.progress("confirming in real time", self.examples)
            told = self._play(self._world(), story.actions)
            failure = told.failure
            if failure is not None and doubted & {f.property for f in failure.failing_findings}:
                self.confirmed = failure
                failure_events = world.history.events()
                self._fail(world, None, tuple(PROPERTIES.ids()), failure_events, broke_at=None,
                           moved_clock=True, doubted=world.doubted)
                return
            why = "the story told again in real time did not break it"
            self._not_confirmed |= doubted
        elif tried:
            why = "a story that broke it only with a moved clock was told in real time before"
        elif story.actions is not None:
            why = ("the exploration already confirmed as many stories in real time as it may"
                   if self.confirm else "real-time confirmation is off")
        for finding in world.doubted:
            self.moved_clock.append(Note(
                finding.property, finding.key,
                f"{MOVED_CLOCK}, not confirmed ({why}): {finding.message}",
                {"moved_clock": True, "finding": finding.to_json()}))

    def _fail(self, world: World, result: CheckResult | None, properties: tuple[str, ...],
              events: Sequence[Event] = (), *, broke_at: int | None,
              error: str | None = None, moved_clock: bool = False,
              doubted: Sequence[Finding] = ()) -> None:
        """Keep the failing story as it stands now; the steps drawn after it change nothing."""
        self._failures += 1
        if self.first_failure is None:
            self.first_failure = (self.examples, time.monotonic() - self.started)
            if self.phase == "drawing":
                self.phase = "shrinking"
        if result is None and doubted:
            result = CheckResult({}, [], [], list(doubted))
        failure = Failure(tuple(world.steps), tuple(events) or world.history.events(), result,
                          properties, broke_at, error, self._failures, moved_clock)
        world.failure = failure
        if self.best is None or failure.operations < self.best.operations:
            self.improved_at = self.examples
        if self.best is None or failure.rank < self.best.rank:
            self.best = failure

    def reportable(self, best: Failure | None) -> Failure | None:
        """The failure to report: ``best``, told in real time when only a moved clock showed
        it (else the story first confirmed in real time)."""
        if best is None or not best.moved_clock:
            return best
        if self.confirmed is not None and best.operations >= self.confirmed.operations:
            return self.confirmed  # the story already told in real time is as short
        story = in_real_time(best.steps, best.events)
        if story.actions is not None:
            told = self._play(self._world(), story.actions).failure
            if told is not None and best.broken in {f.property for f in told.failing_findings}:
                return told
        return self.confirmed

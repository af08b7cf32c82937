"""``explore``: start the target once, draw and shrink stories, report the shortest failing one.

Hypothesis draws and shrinks stories against it, and the shortest failing one is reported
through the same handlers as ``run``.  An HTTP service and a queue consumer are explored alike;
their front ends (``harness._front.Explorer``) say what differs.

One deployment (the target and its Toxiproxy proxy; for a consumer, its broker too) serves
every example; each example has
fresh keys and tenants, so examples do not see each other.  A given seed draws the same
stories.  Under ``CI=true`` Hypothesis runs with its ``ci`` settings (derandomised, no example
database) and the seed is fixed unless given; otherwise failing examples are kept in a
database under the state directory (``database``), so the next exploration tries them first.
"""

from __future__ import annotations

import ast
import functools
import random
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import FlakyStrategyDefinition
from hypothesis.internal.conjecture import engine
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from harness._errors import UsageError
from harness._front import WHOLE, Explorer, front_for
from harness._history import Event
from harness._interrupts import (
    Interrupted,
    each_as_done,
    interruption_handled,
    raise_if_interrupted,
    signals_deferred,
)
from harness._outcomes import (
    Handler,
    Progress,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    ScenarioFinished,
    ScenarioOutcome,
    ScenarioStarted,
    Step,
)
from harness._profiles import in_ci
from harness._runner import DEFAULT_RETRY_HORIZON
from harness._target import Target
from harness.explore._failure import Failure
from harness.explore._minimise import (
    SHRINK_SLACK,
    EnoughShrinking,
    drop_steps,
    enough,
    shrink_deadline,
)
from harness.explore._opening import Opening, opening_stories, tell
from harness.explore._real_time import DEFER_REAL_TIME
from harness.explore._report import outcome_name, outcome_of, replay_line
from harness.explore._scenario import EXPLORER
from harness.explore._story import (
    Provenance,
    Story,
    clear_stories,
    failure_story,
    save_story,
)
from harness.explore._story_session import (
    ConfirmedLate,
    Decisions,
    Ledger,
    StoryFailed,
    StorySession,
    TargetLost,
    emitter,
)
from harness.judging._findings import klass_of
from harness.services._paths import state_dir
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy

__all__ = [
    "CI_SEED",
    "DEFAULT_SHRINK_SECONDS",
    "DEFAULT_STEPS",
    "Exploration",
    "ExploreConfig",
    "explore",
    "hypothesis_settings",
    "searches_at_once",
]

#: Steps per example: room for a story of several operations and faults, short enough that
#: an example takes a second or two.
DEFAULT_STEPS = 14
#: The seed under CI when none is given: derandomised, as Hypothesis's ``ci`` profile is.
CI_SEED = 0
#: The most that shrinking a failing story and dropping its single steps may take (Hypothesis's
#: own limit is five minutes); it stops far sooner once it no longer pays (``_minimise``).
DEFAULT_SHRINK_SECONDS = 60.0


@dataclass(frozen=True)
class ExploreConfig:
    target: Target
    max_examples: int
    seed: int | None = None
    report_dir: Path | None = None
    database: Path | None = None  # where Hypothesis keeps failing examples; None: nowhere
    steps: int = DEFAULT_STEPS
    shrink_seconds: float = DEFAULT_SHRINK_SECONDS
    allow_remote: bool = False
    retry_horizon: float = DEFAULT_RETRY_HORIZON
    toxiproxy: ToxiproxyServer | None = None  # shared with other runs; started when None
    #: Count a finding seen only with a moved clock without telling its story in real time.
    trust_moved_clock: bool = False
    #: Tell the opening's stories before Hypothesis draws (``_opening``).
    opening: bool = True
    #: Searches at once, each on a target instance of its own with a seed of its own, the
    #: budget and the opening shared between them (``searches_at_once``).
    jobs: int = 1
    #: Stop at the first failure kept (shortened), as explorations did before they reported
    #: every distinct flaw: a gate that only needs to fail fast.
    first_only: bool = False


@dataclass(frozen=True)
class Exploration:
    """The run result every report renders, and each kept failure's story (safety first)
    with the file it was saved to."""

    result: RunResult
    stories: tuple[Story[Any], ...] = ()
    story_paths: tuple[Path | None, ...] = ()

    @property
    def story(self) -> Story[Any] | None:
        """The first story (the worst failure), if one failed."""
        return self.stories[0] if self.stories else None

    @property
    def story_path(self) -> Path | None:
        return self.story_paths[0] if self.story_paths else None


def hypothesis_settings(config: ExploreConfig, *, max_examples: int | None = None,
                        reuse: bool = True) -> settings:
    """A search's Hypothesis settings: the ``ci`` profile under CI, quiet, no deadline
    (a target's answer takes what it takes), shrinking from the first failure on (the
    explorer keeps it and starts the next search for failures of other kinds with what is left
    of the budget, ``max_examples``), the failing examples of earlier explorations replayed
    only by the first search (``reuse``), and no explain phase (the story explains)."""
    if config.max_examples < 1:
        raise UsageError("--max-examples must be at least 1")
    ci = in_ci()
    database = (DirectoryBasedExampleDatabase(str(config.database))
                if config.database is not None and not ci else None)
    return settings(
        settings.get_profile("ci" if ci else "default"),
        max_examples=max_examples or config.max_examples,
        stateful_step_count=config.steps,
        database=database,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
        report_multiple_bugs=False,
        phases=((Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink) if reuse
                else (Phase.explicit, Phase.generate, Phase.shrink)),
    )


def _seed(config: ExploreConfig) -> int:
    if config.seed is not None:
        return config.seed
    return CI_SEED if in_ci() else random.SystemRandom().randrange(2**32)


@contextmanager
def _shrinking_budget(seconds: float) -> Iterator[None]:
    """Hypothesis stops shrinking after ``MAX_SHRINKING_SECONDS``, a constant it documents as
    the one to patch; every shrink attempt here is a real story against a real server, so the
    exploration sets its own, shorter budget (the shortest story so far is kept)."""
    if not hasattr(engine, "MAX_SHRINKING_SECONDS"):
        yield
        return
    saved = engine.MAX_SHRINKING_SECONDS
    engine.MAX_SHRINKING_SECONDS = int(seconds)
    try:
        yield
    finally:
        engine.MAX_SHRINKING_SECONDS = saved


def _search(machine: type[RuleBasedStateMachine], seed: int, config: ExploreConfig, *,
            max_examples: int, reuse: bool) -> None:
    """Let Hypothesis draw, judge and shrink, until a story fails or ``max_examples`` are
    drawn; the machine's session keeps the stories that failed."""

    try:
        _hypothesis_run(machine, seed, config, max_examples=max_examples, reuse=reuse)
    except* EnoughShrinking:
        pass  # shrinking no longer paid: the session holds the shortest story so far
    except* ConfirmedLate:
        pass  # real time broke a property again: the session holds that story
    except* StoryFailed:
        # A broken property, shrunk; or a failure that did not come back when Hypothesis
        # replayed it (a race the target lost once, raised inside a Flaky): the session holds
        # every story as it failed.
        pass
    except* FlakyStrategyDefinition:
        # An example stopped (``EnoughShrinking``) or failed at another step when Hypothesis
        # drew it again: a real target is no pure function.  The session holds every story
        # as it went.
        pass


def _hypothesis_run(machine: type[RuleBasedStateMachine], seed: int,
                    config: ExploreConfig, *, max_examples: int, reuse: bool) -> None:
    """Hypothesis's run of the machine.  A signal may land inside Hypothesis's own bookkeeping
    (reading the test's source for its database key), where its ``Interrupted`` turns into
    another error as Hypothesis fails on its half-made state: the user still asked to stop."""
    def example() -> RuleBasedStateMachine:
        """The machine's next example.  A function, not the class: Hypothesis reads its
        factory's source for the database key, and the source of a class is found by parsing
        its module with ``ast``, which CPython 3.11 cannot do in two threads at once (searches
        at once failed with "AST constructor recursion depth mismatch")."""
        return machine()

    try:
        # Hypothesis documents any factory of machines; its annotation names the class
        factory = cast(type[RuleBasedStateMachine], hypothesis_seed(seed)(example))
        run_state_machine_as_test(factory, settings=hypothesis_settings(
            config, max_examples=max_examples, reuse=reuse))
    except Exception:
        raise_if_interrupted()
        raise


def _stop_if_enough(session: StorySession[Any, Any], limit: float) -> None:
    """Stop Hypothesis once shrinking no longer pays (see ``_minimise``)."""
    if enough(session, limit=limit, fewest=session.fewest_steps) is not None:
        raise EnoughShrinking


def _round_seed(seed: int, search: int) -> int:
    """The seed of an exploration's ``search``-th Hypothesis search: the seed itself first,
    then one derived from it, so a seed still draws the same searches and each search draws
    other stories than the last (which ended at the failure it found)."""
    return seed if search == 0 else random.Random(f"{seed}/search {search}").randrange(2**32)


@dataclass(frozen=True)
class Kept:
    """A failure the exploration keeps, shortened, with when its hunt first saw it (examples
    and seconds from the exploration's start) and whether its shortening ran to the end."""

    failure: Failure[Any]
    examples: int
    seconds: float
    shrunk: bool = True


@dataclass
class _Search:
    """What an exploration found, however far it got: each search's session (one, or one per
    search run at once), the failures kept, and what stopped it."""

    sessions: list[StorySession[Any, Any]] = field(default_factory=list)
    hunters: list[_Hunter] = field(default_factory=list)
    kept: list[Kept] = field(default_factory=list)
    stopped: Interrupted | None = None
    ledger: Ledger = field(default_factory=Ledger)
    #: The opening's stories told so far, by any search of any part.
    told: list[Opening] = field(default_factory=list)
    _telling: threading.Lock = field(default_factory=threading.Lock)

    def first_telling(self, story: Opening) -> bool:
        """Whether ``story`` is yet to be told, and now counted told: a later part's opening
        tells only what no earlier part told (the same moves show the same on either)."""
        with self._telling:
            if story in self.told:
                return False
            self.told.append(story)
            return True

    @property
    def runs(self) -> int:
        """Every example played, shrinking and dropping steps included."""
        return sum(h.session.examples + h.extra_runs for h in self.hunters)


class _Hunter:
    """One search's hunts: each failure it finds is shortened and kept, and the search goes
    on for failures of other kinds (``_distinct``) within its budget.  Searches run at once
    share the exploration's ledger (what is kept is kept for all) and tell the opening's
    stories between them (``share``: this search's place, and how many there are)."""

    def __init__(self, config: ExploreConfig, front: Explorer, deployment: Any,
                 emit: Callable[[RunEvent], None], found: _Search, *,
                 share: tuple[int, int] = (0, 1), part: int = 0,
                 earlier: tuple[int, float] = (0, 0.0),
                 shown: Callable[[tuple[int, int], int], int] = lambda search, n: n) -> None:
        self.front, self.deployment, self.emit = front, deployment, emit
        self.found = found
        self.share = share
        #: The examples this search drew in its earlier parts, and the seconds from its first
        #: part's start to this one's: when a failure was sighted counts from the first.
        self.earlier = earlier
        self.extra_runs = 0  # examples played by the sessions that drop steps
        session = front.session(deployment, config,
                                listener=lambda event: emit(Step(EXPLORER.name, event)),
                                progress=lambda phase, n: emit(Progress(
                                    EXPLORER.name, phase,
                                    shown((share[0], part), n + self.extra_runs))))
        self.session = session
        session.ledger = found.ledger
        found.sessions.append(session)
        found.hunters.append(self)
        front.prepare(session)
        #: The exploration's parts (``Explorer.parts``); this search draws the ``part``-th
        #: with its share of the budget.
        self.parts = front.parts(session)
        self.config = replace(config, max_examples=-(-config.max_examples // len(self.parts)))
        session.enough = self._enough
        #: Undecided examples Hypothesis draws another in place of: at most half the budget,
        #: past which the examples cannot make a pass anyway (``Decisions.doubt``).
        session.replacements = self.config.max_examples // 2
        session.defer_real_time = DEFER_REAL_TIME
        self.machine = front.machine_for(session, self.parts[part])

    def run(self, seed: int) -> None:
        """The opening (this search's share of it), then Hypothesis's searches until the
        budget is spent, then the stories that waited for a telling in real time; with
        ``first_only``, until a failure is kept."""
        session = self.session
        if self.config.opening:
            place, searches = self.share
            for story in opening_stories(cast(Any, self.machine))[place::searches]:
                if self.done():
                    return
                if not self.found.first_telling(story):
                    continue  # an earlier part told it
                session.hunt()
                if tell(cast(Any, self.machine), story) or session.best is not None:
                    self._keep_hunted()
                self._keep_aside()
        opened = session.drawn
        search = 0
        while session.drawn - opened < self.config.max_examples and not self.done():
            session.hunt()
            before = session.drawn
            session.rejecting = True
            try:
                _search(self.machine, _round_seed(seed, search), self.config,
                        max_examples=self.config.max_examples - (session.drawn - opened),
                        reuse=search == 0)
            finally:
                session.rejecting = False
            search += 1
            if self.done():
                break  # another search kept the first failure
            if session.best is None and not session.tell_pending():
                break  # the budget ran out with nothing new; what waited is told
            self._keep_hunted()
            self._keep_aside()
            if session.drawn == before:
                break  # Hypothesis drew nothing more: its search space is spent
        session.hunt()
        while not self.done() and session.tell_pending():
            self._keep_hunted()
            self._keep_aside()
            session.hunt()
        if self.done():
            session.leave_pending("the exploration stops at its first failure (--first-only)")

    def _enough(self, session: StorySession[Any, Any]) -> None:
        """Stop Hypothesis as an example starts once shrinking no longer pays, or once another
        search kept the first failure of an exploration that stops there."""
        if self.done():
            raise EnoughShrinking
        _stop_if_enough(session, self.config.shrink_seconds)

    def done(self) -> bool:
        """Whether the exploration stops: it was asked to stop at its first failure, and one
        (of any search) was kept."""
        return self.config.first_only and bool(self.found.kept)

    def _keep_hunted(self) -> None:
        """Shorten the hunt's failure (Hypothesis shrank it; drop steps) and keep it."""
        session = self.session
        best = session.best
        if best is None:
            return
        deadline = shrink_deadline(session, limit=self.config.shrink_seconds)
        self._keep(self._shortened(best, deadline), self._sighted())

    def _keep_aside(self) -> None:
        """Shorten and keep each failure met while another was hunted, in its own turn."""
        session = self.session
        while not self.done() and (failure := session.ledger.next_aside()) is not None:
            session.hunt(failure.new)
            deadline = time.monotonic() + min(self.config.shrink_seconds, SHRINK_SLACK)
            self._keep(self._shortened(failure, deadline), self._sighted(failure))

    def _sighted(self, failure: Failure[Any] | None = None) -> tuple[int, float]:
        """When the hunt first saw its failure: examples and seconds from the start."""
        session = self.session
        examples, seconds = self.earlier
        if failure is None and session.hunt_found is not None:
            found, since = session.hunt_found
            return examples + found, seconds + session.hunt_started - session.started + since
        return examples + session.examples, seconds + time.monotonic() - session.started

    def _shortened(self, failure: Failure[Any], deadline: float | None) -> Failure[Any] | None:
        """``failure`` with steps dropped before ``deadline``, told in real time if only a
        moved clock showed it (None: real time did not confirm it)."""
        session = self.session
        last = session
        if deadline is not None:
            runs = session.examples + self.extra_runs
            dropping = self.front.session(
                self.deployment, self.config,
                progress=lambda phase, n: self.emit(Progress(EXPLORER.name, phase, runs + n)),
                phase="minimising", confirm=False)
            dropping.ledger = session.ledger
            dropping.hunt(failure.new)
            dropping.confirmed = session.confirmed
            failure = drop_steps(dropping, failure, deadline=deadline)
            self.extra_runs += dropping.examples
            last = dropping
        return last.reportable(failure)

    def _keep(self, failure: Failure[Any] | None, sighted: tuple[int, float]) -> None:
        """Keep ``failure``, unless a search at once with this one kept its kinds first."""
        if failure is not None and self.found.ledger.keep(failure):
            self.found.kept.append(Kept(failure, *sighted))


def _search_seed(seed: int, search: int, part: int = 0) -> int:
    """The seed of the ``search``-th of several searches at once in the exploration's
    ``part``-th part: the given one first."""
    if part == 0:
        return seed if search == 0 else random.Random(f"{seed}/job {search}").randrange(2**32)
    return random.Random(f"{seed}/part {part}/job {search}").randrange(2**32)


def _run_searches(config: ExploreConfig, front: Explorer, seed: int, jobs: int,
                  started_at: str, emit: Callable[[RunEvent], None], found: _Search) -> None:
    """Draw, shrink and drop steps, filling ``found`` as it goes so an interruption at any
    moment leaves what was found so far: one search on one deployment, or ``jobs`` at once,
    each on a deployment of its own with its own seed (``_search_seed``) and its share of the
    budget and of the opening, sharing one Toxiproxy.  Each search explores the target's
    parts (``Explorer.parts``) one after another, each on a fresh deployment."""
    with ExitStack() as stack:
        toxiproxy = config.toxiproxy
        if jobs > 1 and toxiproxy is None:
            toxiproxy = stack.enter_context(start_toxiproxy(log_dir=_workdir(config,
                                                                               started_at)))

        def hunt(number: int, part: int, earlier: tuple[int, float]) -> _Hunter:
            """Search ``part`` of the target on a deployment of its own."""
            with front.deployed(config.target, command="explore", started_at=started_at,
                                report_dir=_files(config, started_at, number, part, jobs),
                                allow_remote=config.allow_remote,
                                toxiproxy=toxiproxy) as deployment:
                if jobs == 1 and part == 0:  # started once its target is up, as a run is
                    emit(RunStarted(config.target, (EXPLORER.name,), seed, config.report_dir))
                    emit(ScenarioStarted(EXPLORER.name, 0, 1))
                budget = replace(config, max_examples=-(-config.max_examples // jobs))
                hunter = _Hunter(budget, front, deployment, emit, found, share=(number, jobs),
                                 part=part, earlier=earlier, shown=counted)
                hunter.run(_search_seed(seed, number, part))
                return hunter

        def search(number: int) -> None:
            """One search: each part of the target in turn (``Explorer.parts``)."""
            began = time.monotonic()
            hunter = hunt(number, 0, (0, 0.0))
            for part in range(1, len(hunter.parts)):
                if hunter.done():
                    return
                hunter = hunt(number, part, (hunter.earlier[0] + hunter.session.examples,
                                             time.monotonic() - began))

        shown: dict[tuple[int, int], int] = {}

        def counted(search_and_part: tuple[int, int], examples: int) -> int:
            shown[search_and_part] = examples
            return sum(shown.values())

        if jobs == 1:
            search(0)
            return
        emit(RunStarted(config.target, (EXPLORER.name,), seed, config.report_dir))
        emit(ScenarioStarted(EXPLORER.name, 0, 1))
        pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="search")
        futures = [pool.submit(search, number) for number in range(jobs)]
        try:
            each_as_done(futures)
            for future in futures:
                future.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _files(config: ExploreConfig, started_at: str, search: int, part: int,
           jobs: int) -> Path | None:
    """Where one search's deployment of one part keeps its files: the report directory for
    the one search's first part, a directory of its own under it for any other."""
    if jobs == 1 and part == 0:
        return config.report_dir
    workdir = _workdir(config, started_at)
    searched = workdir if jobs == 1 else workdir / f"search-{search + 1}"
    return searched if part == 0 else searched / f"part-{part + 1}"


def _workdir(config: ExploreConfig, started_at: str) -> Path:
    """Where an exploration's deployments keep their files: the report directory, or the
    state directory."""
    return config.report_dir or state_dir() / "explore" / started_at.replace(":", "")


def searches_at_once(target: Target, jobs: int) -> tuple[int, str | None]:
    """How many searches an exploration may run at once on ``target`` (each needs an instance
    of its own), and why fewer than ``jobs`` if so."""
    why = None if jobs == 1 else front_for(target).explorer().alone(target)
    return (1, why) if why is not None else (jobs, None)


def explore(config: ExploreConfig, handlers: Sequence[Handler] = ()) -> Exploration:
    """Explore ``config.target`` and report every distinct failing story, each shortened (or
    that none failed).

    Interrupted (SIGINT, SIGTERM) at any moment, it still reports, marked incomplete: the
    failures kept so far, and the one being shortened with its story as far as shrinking got;
    the last files are written with the signals held back, so a second Ctrl-C cannot leave
    them half-done."""
    _parse_one_at_a_time()
    seed = _seed(config)
    front = front_for(config.target).explorer()
    jobs, alone = searches_at_once(config.target, config.jobs)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    emit = _one_at_a_time(emitter(handlers))
    found = _Search()
    try:
        with _shrinking_budget(config.shrink_seconds):
            _run_searches(config, front, seed, jobs, started_at, emit, found)
    except TargetLost as lost:
        raise lost.error from None
    except Interrupted as stop:  # the target is stopped; report what was found, incomplete
        interruption_handled()
        found.stopped = stop
        _keep_unfinished(found)
    at_once: dict[str, object] = {"searches": jobs, "asked": config.jobs, "why_fewer": alone}
    with signals_deferred() as held:
        exploration = _report(config, front, seed, started_at, time.monotonic() - clock, found,
                              emit, at_once)
    late = held.pending
    if late is not None and found.stopped is None:  # stopped while the files were written
        found.stopped = late
        exploration = _report(config, front, seed, started_at, time.monotonic() - clock, found,
                              emit, at_once)
    return exploration


_PARSE_LOCK = threading.Lock()


def _parse_one_at_a_time() -> None:
    """CPython before 3.12 cannot run ``ast.parse`` in two threads at once ("SystemError: AST
    constructor recursion depth mismatch", cpython#106905), and Hypothesis parses source while
    it draws (a rule's precondition, described from its lambda's source).  Explorations run in
    threads (``--jobs``; the corpus tests play services side by side), so every parse in this
    process takes a lock; installed once, never removed (a thread may be inside it)."""
    if sys.version_info >= (3, 12) or getattr(ast.parse, "_one_at_a_time", False):
        return
    parse = ast.parse

    @functools.wraps(parse)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _PARSE_LOCK:
            return parse(*args, **kwargs)

    locked._one_at_a_time = True  # type: ignore[attr-defined]
    ast.parse = locked


def _one_at_a_time(emit: Callable[[RunEvent], None]) -> Callable[[RunEvent], None]:
    """``emit`` for searches at once: the handlers hear one event at a time."""
    lock = threading.Lock()

    def locked(event: RunEvent) -> None:
        with lock:
            emit(event)

    return locked


def _keep_unfinished(found: _Search) -> None:
    """After an interruption: each search's failure being shortened, as far as it got (a
    story only a moved clock showed is kept only as the story real time confirmed)."""
    for session in found.sessions:
        best = session.best
        if best is not None and best.moved_clock:
            best = session.confirmed
        if best is None or any(k.failure.new & best.new for k in found.kept):
            continue
        examples, seconds = session.hunt_found or (session.examples, 0.0)
        found.kept.append(Kept(best, examples,
                               session.hunt_started - session.started + seconds, shrunk=False))


def _sighting(sessions: Sequence[StorySession[Any, Any]]) -> dict[str, float] | None:
    """When a moved clock first showed a finding, which a real-time telling then had to
    confirm (or not): the time to the first failure had the moved clock been trusted."""
    seen = [s.first_sighting for s in sessions if s.first_sighting is not None]
    if not seen:
        return None
    examples, seconds = min(seen, key=lambda sighting: sighting[1])
    return {"examples": examples, "seconds": round(seconds, 3)}


def _histories(sessions: Sequence[StorySession[Any, Any]]) -> list[Event]:
    """Every example's history of every search, numbered on as one history."""
    events: list[Event] = []
    op = 0
    for session in sessions:
        kept = session.kept
        events += [replace(e, index=len(events) + e.index, op=op + e.op) for e in kept]
        op += max((e.op for e in kept), default=-1) + 1
    return events


def _in_report_order(kept: Sequence[Kept]) -> list[Kept]:
    """Safety first, then by property, each in the order it was found."""
    def order(k: Kept) -> tuple[bool, int]:
        first = next(iter(sorted(k.failure.new or k.failure.kinds,
                                 key=lambda kind: int(kind.property[1:]))), None)
        if first is None:
            return True, 99
        return klass_of(first.property) != "safety", int(first.property[1:])
    return sorted(kept, key=order)


def _report(config: ExploreConfig, front: Explorer, seed: int, started_at: str, seconds: float,
            found: _Search, emit: Callable[[RunEvent], None],
            at_once: dict[str, object]) -> Exploration:
    """The exploration as a run result, told to every handler: one outcome per kept failure
    (safety first), each with its own story saved and its own replay line; one outcome with
    every example's history when none failed."""
    sessions = found.sessions
    kept_events = _histories(sessions)
    decisions = Decisions.merged([s.decisions for s in sessions])
    notes = [*(n for s in sessions for n in s.moved_clock), *decisions.not_run()]
    summary = front.tally([t for s in sessions for t in s.summaries])
    doubt = decisions.doubt()
    stories: list[Story[Any]] = []
    paths: list[Path | None] = []
    outcomes: list[ScenarioOutcome] = []
    clear_stories(config.report_dir)
    for number, k in enumerate(_in_report_order(found.kept), 1):
        provenance = Provenance(seed, k.examples, k.seconds, found.runs, seconds)
        story = failure_story(k.failure, target=config.target, found=provenance,
                              shrunk=k.shrunk)
        path = save_story(story, config.report_dir, number=number)
        stories.append(story)
        paths.append(path)
        outcomes.append(outcome_of(k.failure, doubt=None, seconds=seconds, story_path=path,
                                   name=outcome_name(number),
                                   notes=notes if number == 1 else ()))
    if not outcomes:
        outcomes.append(outcome_of(None, doubt=doubt, seconds=seconds, story_path=None,
                                   kept=kept_events, notes=notes, summary=summary))
    first = stories[0] if stories else None
    extra: dict[str, object] = {"explore": {
        "seed": seed, "max_examples": config.max_examples, "runs": found.runs,
        "examples": sum(s.examples for s in sessions),
        "steps": sum(s.steps for s in sessions),
        **front.sent(kept_events),
        "found": first is not None,
        "shrunk": first.shrunk if first else None,
        "examples_to_failure": first.examples if first else None,
        "seconds_to_failure": first.seconds if first else None,
        "operations": first.operations if first else None,
        "property": first.property if first else None,
        "story": str(paths[0]) if paths and paths[0] else None,
        "replay": replay_line(paths[0] if paths else None),
        "failures": [_failure_line(story, path) for story, path in zip(stories, paths,
                                                                        strict=True)],
        "confirmed_in_real_time": sum(s.confirmations for s in sessions),
        "first_seen_with_a_moved_clock": _sighting(sessions),
        "not_drawn": {k: v for s in sessions for k, v in s.not_drawn.items()},
        "not_run": [{"example": n, "why": reasons} for n, reasons in decisions.undecided],
        "at_once": at_once,
        "parts": list(found.hunters[0].parts) if found.hunters else [WHOLE],
    }}
    stopped = found.stopped
    result = RunResult(config.target, tuple(outcomes), seed, started_at, config.report_dir,
                       config.retry_horizon, seconds, stopped is None, extra,
                       planned=(EXPLORER.name,),
                       stopped_by=stopped.signal_name if stopped is not None else None)
    for outcome in outcomes:
        emit(ScenarioFinished(outcome, result))
    emit(RunFinished(result))
    return Exploration(result, tuple(stories), tuple(paths))


def _failure_line(story: Story[Any], path: Path | None) -> dict[str, object]:
    """One kept failure in results.json: what broke, how, where its story is."""
    return {"property": story.property, "kinds": story.kinds, "properties": story.properties,
            "examples_to_failure": story.examples, "seconds_to_failure": story.seconds,
            "operations": story.operations, "shrunk": story.shrunk,
            "story": str(path) if path else None, "replay": replay_line(path)}

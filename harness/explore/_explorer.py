"""``explore``: start the target once, draw and shrink stories, report the shortest failing one.

Hypothesis draws and shrinks stories against it, and the shortest failing one is reported
through the same handlers as ``run``.  An HTTP service and a queue consumer are explored alike;
their front ends (``_front_protocol``) say what differs.

One deployment (the target and its Toxiproxy proxy; for a consumer, its broker too) serves
every example; each example has
fresh keys and tenants, so examples do not see each other.  A given seed draws the same
stories.  Under ``CI=true`` Hypothesis runs with its ``ci`` settings (derandomised, no example
database) and the seed is fixed unless given; otherwise failing examples are kept in a
database under the state directory (``database``), so the next exploration tries them first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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
from harness._interrupts import (
    Interrupted,
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
    ScenarioStarted,
    Step,
)
from harness._profiles import in_ci
from harness._runner import DEFAULT_RETRY_HORIZON
from harness._target import Target
from harness.explore._failure import Failure
from harness.explore._front_protocol import Front
from harness.explore._fronts import front_for
from harness.explore._minimise import EnoughShrinking, drop_steps, enough, shrink_deadline
from harness.explore._opening import tell_opening
from harness.explore._real_time import DEFER_REAL_TIME
from harness.explore._report import outcome_of, replay_line
from harness.explore._scenario import EXPLORER
from harness.explore._story import Provenance, Story, failure_story, save_story
from harness.explore._story_session import (
    ConfirmedLate,
    StoryFailed,
    StorySession,
    TargetLost,
    emitter,
)
from harness.services._toxiproxy import ToxiproxyServer

__all__ = [
    "CI_SEED",
    "DEFAULT_SHRINK_SECONDS",
    "DEFAULT_STEPS",
    "Exploration",
    "ExploreConfig",
    "explore",
    "hypothesis_settings",
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


@dataclass(frozen=True)
class Exploration:
    """The run result every report renders, and the shortest failing story if one failed."""

    result: RunResult
    story: Story[Any] | None
    story_path: Path | None


def hypothesis_settings(config: ExploreConfig) -> settings:
    """The exploration's Hypothesis settings: the ``ci`` profile under CI, quiet, no deadline
    (a target's answer takes what it takes), shrinking from the first failure on (looking on
    for other failures would cost as long again as finding the first did; the shortest story
    wins whatever it breaks), and no explain phase (the story explains)."""
    if config.max_examples < 1:
        raise UsageError("--max-examples must be at least 1")
    ci = in_ci()
    database = (DirectoryBasedExampleDatabase(str(config.database))
                if config.database is not None and not ci else None)
    return settings(
        settings.get_profile("ci" if ci else "default"),
        max_examples=config.max_examples,
        stateful_step_count=config.steps,
        database=database,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
        report_multiple_bugs=False,
        phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink),
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


def _search(machine: type[RuleBasedStateMachine], seed: int, config: ExploreConfig) -> None:
    """Let Hypothesis draw, judge and shrink; the machine's session keeps the stories that
    failed."""

    try:
        _hypothesis_run(machine, seed, config)
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
                    config: ExploreConfig) -> None:
    """Hypothesis's run of the machine.  A signal may land inside Hypothesis's own bookkeeping
    (reading the test's source for its database key), where its ``Interrupted`` turns into
    another error as Hypothesis fails on its half-made state: the user still asked to stop."""
    try:
        with _shrinking_budget(config.shrink_seconds):
            run_state_machine_as_test(hypothesis_seed(seed)(machine),
                                      settings=hypothesis_settings(config))
    except Exception:
        raise_if_interrupted()
        raise


def _stop_if_enough(session: StorySession[Any, Any], limit: float) -> None:
    """Stop Hypothesis once shrinking no longer pays (see ``_minimise``)."""
    if enough(session, limit=limit, fewest=session.fewest_steps) is not None:
        raise EnoughShrinking


@dataclass
class _Search:
    """What an exploration found, however far it got."""

    session: StorySession[Any, Any] | None = None
    best: Failure[Any] | None = None
    runs: int = 0
    shrunk: bool = False  # Hypothesis's shrinking and the dropping of steps both ended
    stopped: Interrupted | None = None


def _run_search(config: ExploreConfig, front: Front, seed: int, deployment: Any,
                emit: Callable[[RunEvent], None], found: _Search) -> None:
    """Draw, shrink and drop steps, filling ``found`` as it goes so an interruption at any
    moment leaves what was found so far."""
    emit(ScenarioStarted(EXPLORER.name, 0, 1))
    session = front.session(deployment, config,
                            listener=lambda event: emit(Step(EXPLORER.name, event)),
                            progress=lambda phase, n: emit(Progress(EXPLORER.name, phase, n)))
    found.session = session
    front.prepare(session)
    session.enough = lambda s: _stop_if_enough(s, config.shrink_seconds)
    session.defer_real_time = DEFER_REAL_TIME
    machine = front.machine_for(session)
    # the opening first (``_opening``); a story of it that fails is as short as a drawn one
    # would shrink to, and Hypothesis does not draw
    if not (config.opening and tell_opening(cast(Any, machine))):
        _search(machine, seed, config)
    if session.best is None:
        session.tell_pending()  # the budget ran out first: what waited is told now
    session.leave_pending("a story that needs no moved clock failed first")
    found.best, found.runs = session.best, session.examples
    deadline = shrink_deadline(session, limit=config.shrink_seconds)
    last = session
    if found.best is not None and deadline is not None:
        runs = found.runs
        dropping = front.session(deployment, config,
                                 progress=lambda phase, n: emit(
                                     Progress(EXPLORER.name, phase, runs + n)),
                                 phase="minimising", confirm=False)
        dropping.confirmed = session.confirmed
        found.best = drop_steps(dropping, found.best, deadline=deadline)
        found.runs += dropping.examples
        last = dropping
    found.best = last.reportable(found.best)
    found.shrunk = True


def explore(config: ExploreConfig, handlers: Sequence[Handler] = ()) -> Exploration:
    """Explore ``config.target`` and report the shortest failing story (or that none failed).

    Interrupted (SIGINT, SIGTERM) at any moment, it still reports, marked incomplete: the
    finding if one was made, with its story as far as shrinking got; the last files are
    written with the signals held back, so a second Ctrl-C cannot leave them half-done."""
    seed = _seed(config)
    front = front_for(config.target)
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    emit = emitter(handlers)
    found = _Search()
    try:
        with front.deployed(config.target, command="explore", started_at=started_at,
                            report_dir=config.report_dir, allow_remote=config.allow_remote,
                            toxiproxy=config.toxiproxy) as deployment:
            emit(RunStarted(config.target, (EXPLORER.name,), seed, config.report_dir))
            _run_search(config, front, seed, deployment, emit, found)
    except TargetLost as lost:
        raise lost.error from None
    except Interrupted as stop:  # the target is stopped; report what was found, incomplete
        interruption_handled()
        found.stopped = stop
        session = found.session
        if session is not None and found.best is None:
            found.best, found.runs = session.best, session.examples
        if found.best is not None and found.best.moved_clock:
            found.best = session.confirmed if session is not None else None
    with signals_deferred() as held:
        exploration = _report(config, front, seed, started_at, time.monotonic() - clock, found,
                              emit)
    late = held.pending
    if late is not None and found.stopped is None:  # stopped while the files were written
        found.stopped = late
        exploration = _report(config, front, seed, started_at, time.monotonic() - clock, found,
                              emit)
    return exploration


def _sighting(session: StorySession[Any, Any] | None) -> dict[str, float] | None:
    """When a moved clock first showed a finding, which a real-time telling then had to
    confirm (or not): the time to the first failure had the moved clock been trusted."""
    if session is None or session.first_sighting is None:
        return None
    examples, seconds = session.first_sighting
    return {"examples": examples, "seconds": round(seconds, 3)}


def _report(config: ExploreConfig, front: Front, seed: int, started_at: str, seconds: float,
            found: _Search, emit: Callable[[RunEvent], None]) -> Exploration:
    """The exploration as a run result, told to every handler, with its story saved."""
    session, best = found.session, found.best
    first = session.first_failure if session is not None else None
    provenance = Provenance(seed, *first, found.runs, seconds) if first is not None else None
    story = (failure_story(best, target=config.target, found=provenance,
                           shrunk=found.shrunk)
             if best is not None and provenance is not None else None)
    story_path = save_story(story, config.report_dir) if story is not None else None
    kept = session.kept if session is not None else []
    outcome = outcome_of(best, undecided=session.undecided if session is not None else [],
                         seconds=seconds, story_path=story_path, kept=kept,
                         notes=session.moved_clock if session is not None else (),
                         summary=front.tally(session.summaries if session is not None else []))
    extra: dict[str, object] = {"explore": {
        "seed": seed, "max_examples": config.max_examples, "runs": found.runs,
        "examples": session.examples if session is not None else 0,
        "steps": session.steps if session is not None else 0,
        **front.sent(kept),
        "found": story is not None,
        "shrunk": found.shrunk if story is not None else None,
        "examples_to_failure": story.examples if story else None,
        "seconds_to_failure": story.seconds if story else None,
        "operations": story.operations if story else None,
        "property": story.property if story else None,
        "story": str(story_path) if story_path else None,
        "replay": replay_line(story_path),
        "confirmed_in_real_time": session.confirmations if session is not None else 0,
        "first_seen_with_a_moved_clock": _sighting(session),
        "not_drawn": dict(session.not_drawn) if session is not None else {},
    }}
    stopped = found.stopped
    result = RunResult(config.target, (outcome,), seed, started_at, config.report_dir,
                       config.retry_horizon, seconds, stopped is None, extra,
                       planned=(EXPLORER.name,),
                       stopped_by=stopped.signal_name if stopped is not None else None)
    emit(ScenarioFinished(outcome, result))
    emit(RunFinished(result))
    return Exploration(result, story, story_path)

"""``replay``: run a saved story again, step by step, against any target, and judge it.

The drawn steps are performed exactly as saved (keys made fresh from their shapes), judged
after each one as during exploration; if the story holds to its end, the clients settle and
every property is judged, as during exploration.  Before anything starts, the story is checked
against the target: an operation named before it exists, a fault the target cannot have, a
clock jump without a clock hook, each is reported with its fix.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness._errors import UsageError
from harness._front import Explorer, front_for, front_named
from harness._outcomes import (
    Handler,
    RunFinished,
    RunResult,
    RunStarted,
    ScenarioFinished,
    ScenarioStarted,
)
from harness._runner import DEFAULT_RETRY_HORIZON
from harness._target import Target
from harness.explore._failure import Failure
from harness.explore._report import outcome_of
from harness.explore._story import Provenance, Story, failure_story, save_story, story_of
from harness.explore._story_session import emitter
from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["Replay", "ReplayConfig", "replay"]

REPLAY = "replay"
#: How many times a story whose outcome depends on a race is told before saying it did not
#: fail again: requests (or messages) released together, or timed against each other, may meet
#: in another order on another telling (Hypothesis kept the telling in which they met the way
#: that broke).  Which stories race, each front end says (``Front.races``).  The second telling
#: sends what the story times against each other in order (``Front.in_order``): a retry drawn
#: 1 ms after its original may have met it answered in the run and running on every telling
#: of a loaded machine.
TELLINGS = 3


def _broke(failure: Failure[Any] | None, wanted: str | None) -> bool:
    return failure is not None and wanted in {f.property for f in failure.failing_findings}


def _tellings(story: Story[Any], front: Explorer) -> list[list[Any]]:
    """The story as drawn and, where it races, told up to ``TELLINGS`` times in all: the
    second time in order, where that differs."""
    drawn = story.actions()
    if story.property is None or not front.races(drawn):
        return [drawn]
    return [drawn, front.in_order(drawn), drawn][:TELLINGS]


@dataclass(frozen=True)
class ReplayConfig:
    target: Target
    report_dir: Path | None = None
    allow_remote: bool = False
    retry_horizon: float = DEFAULT_RETRY_HORIZON
    toxiproxy: ToxiproxyServer | None = None
    trust_moved_clock: bool = False


@dataclass(frozen=True)
class Replay:
    """The judged replay, the story as it went this time, and whether it failed as before."""

    result: RunResult
    story: Story[Any]
    reproduced: bool


def replay(story: Story[Any], config: ReplayConfig,
           handlers: Sequence[Handler] = ()) -> Replay:
    """Run ``story`` against ``config.target``, judge it, and say if it failed as before."""
    front = front_for(config.target).explorer()
    if front.name != story.front:
        raise UsageError(f"the story was drawn against {front_named(story.front).described}, "
                         f"and target {config.target.name} is "
                         f"{front_named(front.name).described}: replay it against a "
                         "target of the same kind (the story's own target is the default)")
    problems = front.problems_with(story.actions(), config.target)
    if problems:
        raise UsageError("the story cannot run against target "
                         f"{config.target.name}:\n  " + "\n  ".join(problems)
                         + "\n  fix: replay it against a target that offers these (the "
                         "story's own target is the default)")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    emit = emitter(handlers)
    emit(RunStarted(config.target, (REPLAY,), story.seed, config.report_dir))
    with front.deployed(config.target, command="replay", started_at=started_at,
                        report_dir=config.report_dir, allow_remote=config.allow_remote,
                        toxiproxy=config.toxiproxy) as deployment:
        emit(ScenarioStarted(REPLAY, 0, 1))
        session = front.session(deployment, config)
        tellings = _tellings(story, front)
        world = session.play(tellings[0])
        telling = 1
        while telling < len(tellings) and not _broke(world.failure, story.property):
            world = session.play(tellings[telling])
            telling += 1
        # The telling that broke the story's property, else the shortest failure seen.
        best = session.reportable(world.failure if _broke(world.failure, story.property)
                                  else session.best)
    seconds = time.monotonic() - clock
    found = Provenance(story.seed, story.examples, story.seconds, story.runs, seconds)
    again = (failure_story(best, target=config.target, found=found) if best is not None
             else story_of(world.steps, None, target=config.target, found=found))
    story_path = save_story(again, config.report_dir)
    outcome = outcome_of(best, doubt=session.decisions.doubt(), seconds=seconds,
                         story_path=story_path, kept=session.kept, name=REPLAY,
                         notes=[*session.moved_clock, *session.decisions.not_run()],
                         summary=front.tally(session.summaries))
    reproduced = story.property is not None and story.property in again.properties
    result = RunResult(config.target, (outcome,), story.seed, started_at, config.report_dir,
                       config.retry_horizon, seconds, True,
                       {"replay": {"of": story.property, "reproduced": reproduced,
                                   "found": again.properties, "tellings": telling}})
    emit(ScenarioFinished(outcome, result))
    emit(RunFinished(result))
    return Replay(result, again, reproduced)


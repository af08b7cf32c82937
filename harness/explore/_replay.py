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
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from harness._deployment import Deployment
from harness._errors import UsageError
from harness._outcomes import (
    Handler,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    ScenarioFinished,
    ScenarioStarted,
)
from harness._paths import state_dir
from harness._runner import DEFAULT_RETRY_HORIZON
from harness._target import Target
from harness._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.explore._report import outcome_of
from harness.explore._session import Session
from harness.explore._story import Provenance, Story, failure_story, story_of
from harness.explore._validity import problems_with
from harness.reports import write_atomic

__all__ = ["Replay", "ReplayConfig", "replay"]

REPLAY = "replay"


@dataclass(frozen=True)
class ReplayConfig:
    target: Target
    report_dir: Path | None = None
    allow_remote: bool = False
    retry_horizon: float = DEFAULT_RETRY_HORIZON
    toxiproxy: ToxiproxyServer | None = None


@dataclass(frozen=True)
class Replay:
    """The judged replay, the story as it went this time, and whether it failed as before."""

    result: RunResult
    story: Story
    reproduced: bool


def replay(story: Story, config: ReplayConfig,
           handlers: Sequence[Handler] = ()) -> Replay:
    """Run ``story`` against ``config.target``, judge it, and say if it failed as before."""
    problems = problems_with(story.actions(), config.target)
    if problems:
        raise UsageError("the story cannot run against target "
                         f"{config.target.name}:\n  " + "\n  ".join(problems)
                         + "\n  fix: replay it against a target that offers these (the "
                         "story's own target is the default)")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()

    def emit(event: RunEvent) -> None:
        for handler in handlers:
            handler.handle(event)

    emit(RunStarted(config.target, (REPLAY,), story.seed, config.report_dir))
    workdir = (config.report_dir
               or state_dir() / "replay" / started_at.replace(":", "")) / "target"
    toxiproxy_context = (nullcontext(config.toxiproxy) if config.toxiproxy is not None
                         else start_toxiproxy(log_dir=workdir))
    with toxiproxy_context as toxiproxy, Deployment(
        config.target, toxiproxy=toxiproxy, workdir=workdir, allow_remote=config.allow_remote,
    ) as deployment:
        emit(ScenarioStarted(REPLAY, 0, 1))
        session = Session(deployment, retry_horizon=config.retry_horizon)
        world = session.play(story.actions())
    seconds = time.monotonic() - clock
    found = Provenance(story.seed, story.examples, story.seconds, story.runs, seconds)
    again = (failure_story(session.best, target=config.target, found=found)
             if session.best is not None
             else story_of(world.steps, None, target=config.target, found=found))
    story_path = config.report_dir / "story.json" if config.report_dir else None
    if story_path is not None:
        write_atomic(story_path, again.to_json())
    outcome = outcome_of(session.best, undecided=session.undecided, seconds=seconds,
                         story_path=story_path, name=REPLAY)
    reproduced = story.property is not None and story.property in again.properties
    result = RunResult(config.target, (outcome,), story.seed, started_at, config.report_dir,
                       config.retry_horizon, seconds, True,
                       {"replay": {"of": story.property, "reproduced": reproduced,
                                   "found": again.properties}})
    emit(ScenarioFinished(outcome, result))
    emit(RunFinished(result))
    return Replay(result, again, reproduced)


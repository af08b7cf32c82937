"""What the explorer asks of a front end (an HTTP service's, a queue consumer's): ``Front``.

Drawing, judging after every step, shrinking, dropping steps, the story, its replay and the
report are the same for both (``_explorer``, ``_replay``, ``_story_session``, ``_minimise``,
``_story``, ``_report``).  What differs is small, and is what a ``Front`` says: how the one
deployment an exploration shares is started, how a session starts each example's world on it
and what it measures first, the state machine Hypothesis runs, what was sent, and how the
examples' tallies add up.  Each front end implements it apart (``_fronts.py``,
``consumer/_front.py``), and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from hypothesis.stateful import RuleBasedStateMachine

from harness._history import Event
from harness._target import Target
from harness.explore._story import Front as FrontName
from harness.explore._story_session import StorySession
from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["Front", "SessionOptions"]


class SessionOptions(Protocol):
    """What a session is made with besides its deployment (an exploration's or a replay's
    config)."""

    @property
    def retry_horizon(self) -> float: ...

    @property
    def trust_moved_clock(self) -> bool: ...


class Front(Protocol):
    """One kind of target, as the explorer drives it."""

    @property
    def name(self) -> FrontName:
        """What a story drawn by this front says it is (``Story.front``)."""

    def problems_with(self, actions: Sequence[Any], target: Target) -> list[str]:
        """Everything that keeps ``actions`` from running, in this order, against ``target``."""

    def races(self, actions: Sequence[Any]) -> bool:
        """Does a story's outcome depend on how things running at once meet?"""

    def in_order(self, actions: Sequence[Any]) -> list[Any]:
        """The story with what it times against each other sent in order, each once the one
        before it was answered: another telling of the same story, for a replay whose drawn
        telling met the other way (the same actions where there is no such thing)."""

    def deployed(self, target: Target, *, command: str, started_at: str,
                 report_dir: Path | None, allow_remote: bool,
                 toxiproxy: ToxiproxyServer | None) -> AbstractContextManager[Any]:
        """The deployment every example of an exploration (or a replay) shares."""

    def session(self, deployment: Any, options: SessionOptions, *,
                listener: Callable[[Event], None] | None = None,
                progress: Callable[[str, int], None] | None = None,
                phase: str = "drawing", confirm: bool = True) -> StorySession[Any, Any]:
        """A session on ``deployment``."""

    def prepare(self, session: StorySession[Any, Any]) -> None:
        """Measure what the machine draws from, once per exploration."""

    def machine_for(self, session: StorySession[Any, Any]) -> type[RuleBasedStateMachine]:
        """The state machine for the session's target."""

    def alone(self, target: Target) -> str | None:
        """Why ``target`` cannot be explored by several searches at once, each on an instance
        of its own (None: it can)."""

    def sent(self, events: Sequence[Event]) -> dict[str, int]:
        """What the examples sent, by name (``requests``; ``publishes``)."""

    def tally(self, summaries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """The examples' tallies (``CheckResult.summary``) as one, or None."""

"""The explorer's two front ends: an HTTP service's and a queue consumer's.

Drawing, judging after every step, shrinking, dropping steps, the story, its replay and the
report are the same for both (``_explorer``, ``_replay``, ``_story_session``, ``_minimise``,
``_story``, ``_report``).  What differs is small, and is what a ``Front`` says: how the one
deployment an exploration shares is started, how a session starts each example's world on it
and what it measures first, the state machine Hypothesis runs, what was sent, and how the
examples' tallies add up.  ``front_for`` picks the front by the target's kind; the consumer's
is imported only when a consumer is explored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from hypothesis.stateful import RuleBasedStateMachine

from harness._history import Event
from harness._target import Target
from harness._toxiproxy import ToxiproxyServer
from harness.explore._actions import Burst, BurstAgain, Overlap, Slow
from harness.explore._machine import machine_for
from harness.explore._session import Session, deployed
from harness.explore._story import Front as FrontName
from harness.explore._story_session import StorySession
from harness.explore._validity import problems_with

__all__ = ["HTTP", "Front", "HttpFront", "SessionOptions", "front_for"]


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

    def sent(self, events: Sequence[Event]) -> dict[str, int]:
        """What the examples sent, by name (``requests``; ``publishes``)."""

    def tally(self, summaries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """The examples' tallies (``CheckResult.summary``) as one, or None."""


class HttpFront:
    """An HTTP service behind Toxiproxy: requests, retries, faults, clock jumps, crashes."""

    name: FrontName = "http"

    def problems_with(self, actions: Sequence[Any], target: Target) -> list[str]:
        return problems_with(actions, target)

    def races(self, actions: Sequence[Any]) -> bool:
        """Requests released together, timed against each other, or a slowed original."""
        return any(isinstance(a, Burst | BurstAgain | Overlap | Slow) for a in actions)

    def deployed(self, target: Target, *, command: str, started_at: str,
                 report_dir: Path | None, allow_remote: bool,
                 toxiproxy: ToxiproxyServer | None) -> AbstractContextManager[Any]:
        return deployed(target, command=command, started_at=started_at,
                        report_dir=report_dir, allow_remote=allow_remote, toxiproxy=toxiproxy)

    def session(self, deployment: Any, options: SessionOptions, *,
                listener: Callable[[Event], None] | None = None,
                progress: Callable[[str, int], None] | None = None,
                phase: str = "drawing", confirm: bool = True) -> StorySession[Any, Any]:
        return Session(deployment, retry_horizon=options.retry_horizon, listener=listener,
                       progress=progress, phase=phase,
                       trust_moved_clock=options.trust_moved_clock, confirm=confirm)

    def prepare(self, session: StorySession[Any, Any]) -> None:
        assert isinstance(session, Session)
        session.measure_latency()
        session.measure_writes()

    def machine_for(self, session: StorySession[Any, Any]) -> type[RuleBasedStateMachine]:
        assert isinstance(session, Session)
        return machine_for(session)

    def sent(self, events: Sequence[Event]) -> dict[str, int]:
        return {"requests": sum(1 for e in events if e.f == "request" and e.type == "invoke")}

    def tally(self, summaries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        return None


HTTP = HttpFront()


def front_for(target: Target) -> Front:
    """The front end for ``target``: a queue consumer's, or an HTTP service's."""
    if getattr(target, "kind", "http") == "consumer":
        from harness.explore.consumer._front import CONSUMER

        return CONSUMER
    return HTTP

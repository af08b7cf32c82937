"""The explorer's part of the HTTP front end: an ``Explorer`` (``harness._front``).

The deployment every example shares, a ``Session`` on it that measures latency and writes
first, the state machine of requests, retries, faults, clock jumps and crashes, and requests
counted.  ``harness/http/_front.py`` hands it to the engine's explorer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine

from harness._front import WHOLE, SessionOptions
from harness._history import Event
from harness._target import Target
from harness.explore._story_session import StorySession
from harness.http.explore._actions import Burst, BurstAgain, Overlap, Slow
from harness.http.explore._machine import machine_for, parts
from harness.http.explore._session import Session, deployed
from harness.http.explore._validity import problems_with
from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["HTTP", "HttpExplorer"]


class HttpExplorer:
    """An HTTP service behind Toxiproxy: requests, retries, faults, clock jumps, crashes."""

    name = "http"
    machine = "IdempotencyMachine"

    def problems_with(self, actions: Sequence[Any], target: Target) -> list[str]:
        return problems_with(actions, target)

    def races(self, actions: Sequence[Any]) -> bool:
        """Requests released together, timed against each other, or a slowed original."""
        return any(isinstance(a, Burst | BurstAgain | Overlap | Slow) for a in actions)

    def in_order(self, actions: Sequence[Any]) -> list[Any]:
        """Each overlap's second request held until its original is answered."""
        return [a.model_copy(update={"in_order": True}) if isinstance(a, Overlap) else a
                for a in actions]

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

    def parts(self, session: StorySession[Any, Any]) -> tuple[str, ...]:
        assert isinstance(session, Session)
        return parts(session)

    def machine_for(self, session: StorySession[Any, Any],
                    part: str = WHOLE) -> type[RuleBasedStateMachine]:
        assert isinstance(session, Session)
        return machine_for(session, part)

    def alone(self, target: Target) -> str | None:
        """A target the harness starts, whose state is its process's or lives in the files or
        store the harness gives each instance (``{workdir}``, ``{store_port}``), gets an
        instance per search; one it does not start, or whose instances would share a store,
        does not: a search's clock jumps, crashes and key-table readings would meet the
        others'."""
        start = target.start
        if start is None:
            return ("the harness does not start the target (no [start]), so the searches "
                    "would share one instance")
        parts = [*start.command, *start.env.values()]
        own_store = any("{workdir}" in p or "{store_port}" in p for p in parts)
        if start.shared_state and not own_store:
            return ("its processes share one store ([start] shared_state) that the start "
                    "command does not place in {workdir}, so the searches' instances would "
                    "share it")
        return None

    def sent(self, events: Sequence[Event]) -> dict[str, int]:
        return {"requests": sum(1 for e in events if e.f == "request" and e.type == "invoke")}

    def tally(self, summaries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        return None


HTTP = HttpExplorer()

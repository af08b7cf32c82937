"""The explorer's part of the queue consumer's front end: an ``Explorer`` (``harness._front``).

The broker, Toxiproxy and the consumers started once and shared by every example, a
``ConsumerSession`` on them, the consumer machine, publishes counted, and the examples' queue
accounts added up."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from hypothesis.stateful import RuleBasedStateMachine

from harness._front import WHOLE, SessionOptions
from harness._history import Event
from harness._target import Target
from harness.consumer._account import add_accounts
from harness.consumer._deployment import ConsumerDeployment
from harness.consumer._runner import deployed
from harness.consumer._target import ConsumerTarget
from harness.consumer.explore._actions import Copies, Republish, StallMidJob
from harness.consumer.explore._machine import machine_for
from harness.consumer.explore._session import ConsumerSession
from harness.consumer.explore._validity import problems_with
from harness.explore._story_session import StorySession
from harness.services._paths import state_dir
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy

__all__ = ["CONSUMER", "ConsumerExplorer"]


@contextmanager
def _deployed(target: ConsumerTarget, *, workdir: Path, allow_remote: bool,
              toxiproxy: ToxiproxyServer | None) -> Iterator[ConsumerDeployment]:
    toxiproxy_context = (nullcontext(toxiproxy) if toxiproxy is not None
                         else start_toxiproxy(log_dir=workdir))
    with toxiproxy_context as server, deployed(target, toxiproxy=server, workdir=workdir,
                                               allow_remote=allow_remote) as deployment:
        yield deployment


class ConsumerExplorer:
    """A queue consumer on a real broker (RabbitMQ or Kafka), its connections behind
    Toxiproxy."""

    name = "consumer"
    machine = "ConsumerMachine"

    def problems_with(self, actions: Sequence[Any], target: Target) -> list[str]:
        return problems_with(actions, target)

    def races(self, actions: Sequence[Any]) -> bool:
        """Copies released together, or a copy handed on while the first consumer works."""
        return any(isinstance(a, Copies | StallMidJob)
                   or (isinstance(a, Republish) and a.copies > 1) for a in actions)

    def in_order(self, actions: Sequence[Any]) -> list[Any]:
        """The same actions: copies released together have no order of their own to keep."""
        return list(actions)

    def deployed(self, target: Target, *, command: str, started_at: str,
                 report_dir: Path | None, allow_remote: bool,
                 toxiproxy: ToxiproxyServer | None) -> AbstractContextManager[Any]:
        """The consumers, their broker (the target's own, the shared one or a throwaway
        node) and Toxiproxy, their files in the report directory or under the state
        directory (``command``/``started_at``)."""
        assert isinstance(target, ConsumerTarget)
        workdir = (report_dir or state_dir() / command / started_at.replace(":", "")) / "target"
        return _deployed(target, workdir=workdir, allow_remote=allow_remote,
                         toxiproxy=toxiproxy)

    def session(self, deployment: Any, options: SessionOptions, *,
                listener: Callable[[Event], None] | None = None,
                progress: Callable[[str, int], None] | None = None,
                phase: str = "drawing", confirm: bool = True) -> StorySession[Any, Any]:
        return ConsumerSession(deployment, retry_horizon=options.retry_horizon,
                               listener=listener, progress=progress, phase=phase,
                               trust_moved_clock=options.trust_moved_clock, confirm=confirm)

    def prepare(self, session: StorySession[Any, Any]) -> None:
        """Nothing to measure: a consumer's faults are timed from its pause hook and feed."""

    def parts(self, session: StorySession[Any, Any]) -> tuple[str, ...]:
        """One whole: the consumer front keeps no account of its clock across a kill (no
        ``ClockKeeper``), so it has no two kinds of step to keep apart."""
        return (WHOLE,)

    def machine_for(self, session: StorySession[Any, Any],
                    part: str = WHOLE) -> type[RuleBasedStateMachine]:
        assert isinstance(session, ConsumerSession)
        return machine_for(session)

    def alone(self, target: Target) -> str | None:
        """A queue consumer is explored by one search: searches at once would each need a
        broker, queues and consumers of their own."""
        return ("a queue consumer is explored by one search (searches at once would each need "
                "a broker, queues and consumers of their own)")

    def sent(self, events: Sequence[Event]) -> dict[str, int]:
        return {"publishes": sum(1 for e in events if e.f == "publish" and e.type == "invoke")}

    def tally(self, summaries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """The queue account of every example, added up, with every example's keys (as a
        scenario's account has them, so the run's account adds this one up again)."""
        totals = add_accounts(summaries)
        if totals is None:
            return None
        return {**totals, "per_key": {key: row for summary in summaries
                                      for key, row in summary.get("per_key", {}).items()}}


CONSUMER = ConsumerExplorer()

"""The HTTP explorer's session: the deployment every example of one exploration shares.

Every example of one exploration (or one replay) shares the running deployment (the target
behind Toxiproxy); the bookkeeping every front end shares (the counts, the shortest failing
story) is ``StorySession``'s (``_story_session``).

``deployed`` is what an exploration and a replay both do around their session: start the one
deployment, as ``run`` does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

from harness._history import Event
from harness._target import Target
from harness.explore._minimise import FEWEST_STEPS
from harness.explore._real_time import RealTimeStory, keys_of
from harness.explore._steps import StepRecord
from harness.explore._story_session import StoryFailed, StorySession, TargetLost, emitter
from harness.http._deployment import Deployment
from harness.http.explore._actions import Action
from harness.http.explore._real_time import in_real_time, without_the_jumps
from harness.http.explore._validity import problems_with
from harness.http.explore._world import World
from harness.judging._checker import PROPERTIES
from harness.judging._findings import Finding
from harness.services._paths import state_dir
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy

__all__ = ["AT_THE_END", "STEP_PROPERTIES", "Session", "StoryFailed", "TargetLost", "deployed",
           "emitter"]

#: Judged only once the story's clients have settled: "retries after a crash converge" cannot
#: be judged while a client is still retrying.
AT_THE_END = frozenset({"P9"})
#: Judged after every step: a breach there is a breach whatever happens next.
STEP_PROPERTIES = tuple(p for p in PROPERTIES.ids() if p not in AT_THE_END)


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


class Session(StorySession[Action, World]):
    """Starts each example's world on the shared deployment (after bringing back an instance
    a crash left down), and measures what the machine draws from: an ordinary request's
    latency, and the writes a charge commits."""

    step_properties = STEP_PROPERTIES
    fewest_steps = FEWEST_STEPS

    deployment: Deployment
    target: Target
    #: An ordinary request's latency, measured once (``measure_latency``): when a second
    #: request must leave to meet the first still running, on a target with no slow hook.
    latency_ms = 0
    #: The committed writes an ordinary charge makes (``measure_writes``).
    writes_per_charge = 0

    def _new_world(self) -> World:
        self.deployment.restart_dead_instances()  # a crash may have left one down
        return World(self.deployment, retry_horizon=self.retry_horizon,
                     trust_moved_clock=self.trust_moved_clock)

    def problems_with(self, actions: Sequence[Action]) -> list[str]:
        return problems_with(actions, self.target)

    def retold(self, steps: Sequence[StepRecord[Action]], events: Sequence[Event],
               doubted: Sequence[Finding]) -> RealTimeStory[Action]:
        return in_real_time(steps, events, lease=self.target.promises.lease,
                            keys=keys_of(doubted))

    def without_the_jumps(self, steps: Sequence[StepRecord[Action]], events: Sequence[Event],
                          doubted: Sequence[Finding]) -> list[Action] | None:
        return without_the_jumps(steps, events, keys=keys_of(doubted))

    def told_in_vain(self, told: World) -> str:
        """The plain reason, or that a slowed request came back before it was meant to: a
        target whose slow hook caps its delay cannot keep a request running through a real
        wait, so its telling tested nothing (a corpus service's 30 s cap did so to every
        takeover of a 30 s lease)."""
        short = told.held_short()
        if not short:
            return super().told_in_vain(told)
        return (f"the story told again in real time did not happen as drawn: {'; '.join(short)}"
                f" (does the target's slow hook cap its delay?)")

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

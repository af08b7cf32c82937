"""The generator's side of a consumer story: what exists, what is on, how draws become actions.

Which jobs exist, which faults are on, whether the consumers are down, and how drawn values
become actions.

Only drawn data and this bookkeeping decide what happens next, never what the consumer did, so
one seed always draws the same stories and Hypothesis can replay and shrink them.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.consumer._target import ConsumerTarget
from harness.consumer.explore._actions import (
    ConsumerAction,
    Copies,
    FailingJob,
    Kill,
    LostAck,
    Poison,
    Publish,
    Rebalance,
    Republish,
    Restart,
    Rewind,
    StallMidJob,
)
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._keys import KeyPlan

__all__ = ["ConsumerPlanner"]


@dataclass(frozen=True)
class _Job:
    id: str
    key: str


class ConsumerPlanner:
    """Turns each drawn rule into its actions, keeping the names a story refers to."""

    def __init__(self, target: ConsumerTarget) -> None:
        self.target = target
        #: Jobs a republish may name: every one whose messages may run (not a poison message,
        #: nor a job made to fail on every delivery).
        self.jobs: list[_Job] = []
        self.faults_on: list[str] = []
        self.down = False  # a kill left the consumers down until a restart
        self._ops = 0
        self._names = 0

    def _fresh(self, *, ordinary: bool = True) -> tuple[str, KeyPlan]:
        self._ops += 1
        self._names += 1
        op, plan = f"o{self._ops}", KeyPlan(name=f"k{self._names}", shape="plain")
        if ordinary:
            self.jobs.append(_Job(op, plan.name))
        return op, plan

    def quiet(self) -> bool:
        """No fault on and every consumer up: a job can be met where a fault means it to."""
        return not self.faults_on and not self.down

    def publish(self, lost: bool) -> list[ConsumerAction]:
        """A new job; its confirm lost only while the consumers can reach the queue: its
        message must be seen to arrive before a republish of it (``first-publish-queued``)."""
        op, plan = self._fresh()
        lost = lost and self.quiet()
        return [Publish(id=op, key=plan, confirm="lost" if lost else "awaited")]

    def copies(self, copies: int) -> list[ConsumerAction]:
        op, plan = self._fresh()
        return [Copies(id=op, key=plan, copies=copies)]

    def republish(self, pick: int, copies: int) -> list[ConsumerAction]:
        """An earlier job again, counted back from the most recent (shrinking picks the last)."""
        job = self.jobs[-1 - pick % len(self.jobs)]
        return [Republish(id=job.id, copies=copies)]

    def poison(self) -> list[ConsumerAction]:
        op, plan = self._fresh(ordinary=False)
        return [Poison(id=op, key=plan)]

    def work_failure(self, failure: str) -> list[ConsumerAction]:
        declared = next(f for f in self.target.hooks.work_failures if f.name == failure)
        op, plan = self._fresh(ordinary=declared.deliveries == "first")
        return [FailingJob(id=op, key=plan, failure=failure)]

    def lost_ack(self, then: str) -> list[ConsumerAction]:
        op, plan = self._fresh()
        return [LostAck(id=op, key=plan, then="kill" if then == "kill" else "cut")]

    def kill(self, mid_job: bool) -> list[ConsumerAction]:
        """Kill the consumer holding a new job (restarted at once), or every consumer (left
        down until a restart)."""
        if mid_job:
            op, plan = self._fresh()
            return [Kill(id=op, key=plan)]
        self.down = True
        return [Kill()]

    def restart(self) -> list[ConsumerAction]:
        self.down = False
        return [Restart()]

    def stall_mid_job(self) -> list[ConsumerAction]:
        op, plan = self._fresh()
        return [StallMidJob(id=op, key=plan)]

    def rebalance(self) -> list[ConsumerAction]:
        op, plan = self._fresh()
        return [Rebalance(id=op, key=plan)]

    def rewind(self, pick: int) -> list[ConsumerAction]:
        """Back to an earlier job, counted back from the most recent (shrinking picks the
        last)."""
        job = self.jobs[-1 - pick % len(self.jobs)]
        return [Rewind(id=job.id)]

    def toggle(self, fault: str) -> list[ConsumerAction]:
        """Heal the fault that is on, or else switch ``fault`` on: one at a time."""
        if self.faults_on:
            return [FaultOff(fault=self.faults_on.pop())]
        self.faults_on.append(fault)
        return [FaultOn(fault=fault)]

    def clock(self, seconds: float, why: str) -> list[ConsumerAction]:
        return [Clock(seconds=seconds, why=why)]

"""The consumer explorer's session: the consumers and broker every example shares.

Every example of one exploration (or one replay) shares the running consumers and their broker;
the bookkeeping is ``StorySession``'s, as for an HTTP service.

After every step the checker judges what a step can break at once: a duplicate (P1), a poison
message that ran or loops (P10), a dedup table that keeps expired keys (P11).  A lost job (P2)
and convergence after a kill or a cut (P9) can only be judged once the queue has drained.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.consumer._deployment import ConsumerDeployment
from harness.consumer._target import ConsumerTarget
from harness.consumer.explore._actions import ConsumerAction
from harness.consumer.explore._validity import problems_with
from harness.consumer.explore._world import ConsumerWorld
from harness.explore._story_session import StorySession

__all__ = ["AT_THE_END", "FEWEST_STEPS", "STEP_PROPERTIES", "ConsumerSession"]

#: Judged only once the queue has drained.
AT_THE_END = frozenset({"P2", "P9"})
#: Judged after every step.
STEP_PROPERTIES = ("P1", "P10", "P11")
#: The fewest drawn steps a consumer story can break each property in (1 for the others):
#: P11 needs a job and a clock jump past its window.
FEWEST_STEPS = {"P11": 2}


class ConsumerSession(StorySession[ConsumerAction, ConsumerWorld]):
    """Starts each example's world on the shared consumers: two of them where they may share
    a store (copies then reach two consumers at once), every one up and connected."""

    step_properties = STEP_PROPERTIES
    fewest_steps = FEWEST_STEPS

    deployment: ConsumerDeployment
    target: ConsumerTarget

    def _new_world(self) -> ConsumerWorld:
        return ConsumerWorld(self.deployment, retry_horizon=self.retry_horizon,
                             consumers=2 if self.target.shares_state else 1)

    def problems_with(self, actions: Sequence[ConsumerAction]) -> list[str]:
        return problems_with(actions, self.target)

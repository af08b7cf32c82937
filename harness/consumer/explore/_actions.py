"""What a story does to a queue consumer, as plain data.

Drawn by the machine, performed by the world, saved in ``story.json`` and read back by
``replay``, as the HTTP explorer's actions are.

Keys are ``KeyPlan``s (a fresh key has a shape, so a replay makes a fresh one); a later step
names an earlier job by its operation (``o1``).  A clock jump and a fault switched on or healed
are the explorer's own ``Clock``, ``FaultOn`` and ``FaultOff``, with the consumer's faults.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from harness.explore._actions import ActionModel, Clock, FaultOff, FaultOn
from harness.explore._keys import KeyPlan

__all__ = ["CONSUMER_FAULT_NAMES", "ConsumerAction", "Copies", "FailingJob", "Kill", "LostAck",
           "Poison", "Publish", "Rebalance", "Republish", "Restart", "Rewind", "StallMidJob",
           "kind_of"]

#: The faults a story switches on and heals: the consumers' broker connections.
CONSUMER_FAULT_NAMES = ("connection-cut", "connection-stall")


class Publish(ActionModel):
    """A new job: one message with a fresh key.  ``confirm = "lost"``: the broker's confirm
    never reaches the producer (the publish is unknown: maybe queued)."""

    op: Literal["publish"] = "publish"
    id: str
    key: KeyPlan
    confirm: Literal["awaited", "lost"] = "awaited"

    def text(self) -> str:
        lost = ", confirm='lost'" if self.confirm == "lost" else ""
        return f"{self.id} = state.publish({self.key.name}{lost})"


class Copies(ActionModel):
    """A new job published as several copies at once, each with a message id of its own and
    its JSON written another way (re-serialised), as a producer's retry storm sends it."""

    op: Literal["copies"] = "copies"
    id: str
    key: KeyPlan
    copies: int = Field(ge=2, le=8)

    def text(self) -> str:
        return f"{self.id} = state.copies({self.key.name}, copies={self.copies})"


class Republish(ActionModel):
    """An earlier job's key published again under a new message id (``copies`` at once), its
    JSON written another way: the same job, as a producer that was not sure sends it."""

    op: Literal["republish"] = "republish"
    id: str
    copies: int = Field(default=1, ge=1, le=8)

    def text(self) -> str:
        more = f", copies={self.copies}" if self.copies > 1 else ""
        return f"state.republish({self.id}{more})"


class Poison(ActionModel):
    """A message the consumer promises to refuse (``[message] poison``)."""

    op: Literal["poison"] = "poison"
    id: str
    key: KeyPlan

    def text(self) -> str:
        return f"{self.id} = state.poison({self.key.name})"


class FailingJob(ActionModel):
    """A new job whose work fails as the declared ``[[hooks.work_failures]]`` entry
    ``failure`` makes it (before or after the work; once or on every delivery)."""

    op: Literal["work-failure"] = "work-failure"
    id: str
    key: KeyPlan
    failure: str

    def text(self) -> str:
        return f"{self.id} = state.work_failure({self.key.name}, failure={self.failure!r})"


class LostAck(ActionModel):
    """A new job whose consumers' acks are held while it commits; then their connections are
    cut (or they are killed and restarted): the committed job's message comes back."""

    op: Literal["lost-ack"] = "lost-ack"
    id: str
    key: KeyPlan
    then: Literal["cut", "kill"] = "cut"

    def text(self) -> str:
        return f"{self.id} = state.lost_ack({self.key.name}, then={self.then!r})"


class Kill(ActionModel):
    """SIGKILL: with a key, the consumer holding a new job paused before its work, which is
    then restarted and the dead consumer's claim let run out; without one, every consumer,
    left down until a ``restart``."""

    op: Literal["kill"] = "kill"
    id: str | None = None
    key: KeyPlan | None = None

    @model_validator(mode="after")
    def _job_named(self) -> Kill:
        if (self.id is None) != (self.key is None):
            raise ValueError("a kill in the middle of a job names both its id and its key")
        return self

    def text(self) -> str:
        if self.key is None:
            return "state.kill()"
        return f"{self.id} = state.kill_mid_job({self.key.name})"


class Restart(ActionModel):
    """Start every consumer a kill left down."""

    op: Literal["restart"] = "restart"

    def text(self) -> str:
        return "state.restart()"


class StallMidJob(ActionModel):
    """A new job paused before its work; the consumer holding it is stalled until the broker
    drops it, and the other consumer gets the message while the first still works."""

    op: Literal["stall-mid-job"] = "stall-mid-job"
    id: str
    key: KeyPlan

    def text(self) -> str:
        return f"{self.id} = state.stall_mid_job({self.key.name})"


class Rebalance(ActionModel):
    """A new job paused in its work past the consumer's poll interval, while the other member
    of its group is up: the group hands the partition over, and the other member reads the
    record again while the first still works (Kafka's zombie)."""

    op: Literal["rebalance"] = "rebalance"
    id: str
    key: KeyPlan

    def text(self) -> str:
        return f"{self.id} = state.rebalance({self.key.name})"


class Rewind(ActionModel):
    """The consumers stopped, their group's offsets set back to an earlier job's message, and
    started again: every message since is read again."""

    op: Literal["rewind"] = "rewind"
    id: str

    def text(self) -> str:
        return f"state.rewind({self.id})"


ConsumerAction = Annotated[
    Publish | Copies | Republish | Poison | FailingJob | LostAck | Kill | Restart | StallMidJob
    | Rebalance | Rewind | FaultOn | FaultOff | Clock,
    Field(discriminator="op"),
]


def kind_of(action: ConsumerAction) -> str:
    """The step kind a report shows for an action."""
    return "stall" if action.op == "stall-mid-job" else action.op

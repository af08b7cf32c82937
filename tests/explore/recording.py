"""A session that records what the HTTP state machine would perform, for tests of what the
machine builds and draws (its rules, its order), not of a target: nothing is sent."""

from __future__ import annotations

from typing import Any

from harness.http.explore._actions import Action
from harness.http.explore._machine import machine_for
from harness.targets._reference import reference_target

REFERENCE = reference_target(store=None, flaw=None)


class RecordingSession:
    """What the machine asks of a session; each example's actions are kept in ``stories``."""

    target = REFERENCE
    latency_ms = 0
    writes_per_charge = 0

    class deployment:  # the attribute the machine reads
        clock_keeper = None

    def __init__(self) -> None:
        self.not_drawn: dict[str, str] = {}
        self.stories: list[list[Action]] = []

    def begin(self) -> list[Action]:
        self.stories.append([])
        return self.stories[-1]

    def act(self, world: list[Action], action: Action) -> None:
        world.append(action)

    def check_step(self, world: list[Action]) -> None:
        pass

    def finish(self, world: list[Action]) -> None:
        pass


def reference_machine(session: RecordingSession) -> Any:
    """The reference server's state machine, over ``session``."""
    return machine_for(session)  # type: ignore[arg-type]

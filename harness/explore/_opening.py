"""The opening: the shortest story of each kind, told before Hypothesis draws.

Hypothesis tries a test's explicit examples (``@example``) before it draws any; a state machine
cannot have them.  The opening is those examples for the explorer: each front end writes out
the shortest stories that show the commonest flaws (for an HTTP service: a request and its
retry, the key reused with another body, copies sent together...), and the explorer tells them
first.  A flaw one of them shows is then found in the first few examples, with a story as short
as it gets, rather than whenever Hypothesis happens to draw it: its first examples repeat one
rule, and a story of a request, a jump and a retry can take dozens of examples to come.

Each story is told through the same state machine as a drawn one (its operations, the invariant
after every step, its teardown), so it is judged, kept and reported alike; only the stories
whose operations the machine has for its target are told.  Every story is told, whatever
failed before it: a story that fails is a failure of its own (the explorer shortens it by
dropping steps, as it does a story Hypothesis cannot shrink, and keeps it), and the opening
goes on; a story that only shows what a kept failure showed fails nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness.explore._story_session import ConfirmedLate, StoryFailed

__all__ = ["Move", "Opening", "opening_stories", "tell"]


@dataclass(frozen=True)
class Move:
    """One step of an opening story: the machine's operation and the values it would draw."""

    operation: str
    values: Mapping[str, Any] = field(default_factory=dict)


#: An opening story: its moves, in order.
Opening = tuple[Move, ...]


class _Example(Protocol):
    """A state machine as the opening drives it (``IdempotencyMachine``, ``ConsumerMachine``):
    each instance is one example's world, judged by its invariant after every step."""

    def the_checker_finds_nothing(self) -> None: ...

    def teardown(self) -> None: ...


class _MachineClass(Protocol):
    """A state machine class: the operations it has rules for, its opening, its examples."""

    operations: frozenset[str]
    opening: tuple[Opening, ...]

    def __call__(self) -> _Example: ...


def opening_stories(machine: _MachineClass) -> list[Opening]:
    """``machine``'s opening stories that it has the operations for, in order."""
    return [story for story in machine.opening
            if {move.operation for move in story} <= machine.operations]


def tell(machine: _MachineClass, story: Sequence[Move]) -> bool:
    """Tell ``story`` as Hypothesis runs an example: the invariant after every step, the
    teardown (which judges the settled story and raises if it failed) at the end."""
    example = machine()
    try:
        for move in story:
            getattr(example, move.operation)(**move.values)
            example.the_checker_finds_nothing()
    except BaseException:
        with suppress(BaseException):  # the world is closed all the same; the first error counts
            example.teardown()
        raise
    try:
        example.teardown()
    except (StoryFailed, ConfirmedLate):  # the story failed, or one told in real time did
        return True
    return False

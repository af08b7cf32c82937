"""A step of a story as it happened: what was done, what came back, how many charges followed.

The world writes these as it acts; the story prints and saves them.  ``settle`` marks what the
story's clients did after the drawn steps (heal, retry until answered), which a replay derives
again rather than reading from the file.  A step is generic in its action: the HTTP explorer's
``Action`` or a queue consumer's (harness/consumer/explore/_actions.py), each a pydantic model
that prints itself as the call a reader sees (``StoryAction``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from harness.judging._analysis import Identity

__all__ = ["A", "StepRecord", "StoryAction"]


class StoryAction(Protocol):
    """What every action of a story is: data with an ``op`` that prints as a call."""

    @property
    def op(self) -> str: ...

    def text(self) -> str: ...


A = TypeVar("A", bound=StoryAction)


@dataclass
class StepRecord(Generic[A]):
    number: int
    kind: str
    text: str
    action: A | None
    response: str | None = None
    effects: int | None = None
    settle: bool = False
    first_event: int = 0
    last_event: int = 0
    identity: Identity | None = None

    def holds(self, index: int) -> bool:
        """Did this step write history event ``index``?"""
        return self.first_event <= index < self.last_event

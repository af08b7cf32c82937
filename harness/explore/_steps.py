"""A step of a story as it happened: what was done, what came back, how many charges followed.

The world writes these as it acts; the story prints and saves them.  ``settle`` marks what the
story's clients did after the drawn steps (heal, retry until answered), which a replay derives
again rather than reading from the file.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness._analysis import Identity
from harness.explore._actions import Action, StepKind

__all__ = ["StepRecord"]


@dataclass
class StepRecord:
    number: int
    kind: StepKind
    text: str
    action: Action | None
    response: str | None = None
    effects: int | None = None
    settle: bool = False
    first_event: int = 0
    last_event: int = 0
    identity: Identity | None = None

    def holds(self, index: int) -> bool:
        """Did this step write history event ``index``?"""
        return self.first_event <= index < self.last_event

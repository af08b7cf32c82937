"""A failing story as the explorer keeps it: its steps, its history and the verdict."""

from __future__ import annotations

from dataclasses import dataclass

from harness._checker import CheckResult
from harness._history import Event
from harness.explore._steps import StepRecord

__all__ = ["Failure"]


@dataclass(frozen=True)
class Failure:
    """One failing story: its steps, its history, the verdict that failed it.

    ``broke_at`` is the step after which the checker first found something (None: once the
    clients settled); ``error`` says why the harness could not go on, when that is the failure.
    """

    steps: tuple[StepRecord, ...]
    events: tuple[Event, ...]
    check: CheckResult | None
    properties: tuple[str, ...]
    broke_at: int | None
    error: str | None
    sequence: int

    @property
    def operations(self) -> int:
        """The drawn steps: what shrinking minimises (settling is derived, not drawn)."""
        return sum(1 for s in self.steps if not s.settle)

    @property
    def rank(self) -> tuple[bool, int, bool, int, int]:
        """Findings before harness errors, then fewer steps, then safety before conformance
        (reports lead with safety), then the later (more shrunk)."""
        first = self.check.findings[0] if self.check and self.check.findings else None
        return (first is None, self.operations, first is None or first.klass != "safety",
                int(first.property[1:]) if first else 0, -self.sequence)

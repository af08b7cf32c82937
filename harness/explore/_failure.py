"""A failing story as the explorer keeps it: its steps, its history and the verdict."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

from harness._history import Event
from harness.explore._distinct import Kind, kinds_of
from harness.explore._steps import A, StepRecord
from harness.judging._checker import CheckResult
from harness.judging._findings import Finding

__all__ = ["Failure"]


@dataclass(frozen=True)
class Failure(Generic[A]):
    """One failing story: its steps, its history, the verdict that failed it.

    ``broke_at`` is the step after which the checker first found something (None: once the
    clients settled); ``error`` says why the harness could not go on, when that is the failure.
    ``moved_clock``: its findings were seen only with a moved clock (a story of the same
    property failed without the jumps or in real time, which is why it counts; the story
    reported is confirmed the same way in the end).
    """

    steps: tuple[StepRecord[A], ...]
    events: tuple[Event, ...]
    check: CheckResult | None
    properties: tuple[str, ...]
    broke_at: int | None
    error: str | None
    sequence: int
    moved_clock: bool = False
    new: frozenset[Kind] = frozenset()

    @property
    def broken(self) -> str | None:
        """The property it breaks first (safety first) among the kinds it is kept for, if a
        finding failed it."""
        findings = self.failing_findings
        wanted = [f for f in findings if (f.property, f.mechanism) in self.new] or findings
        return wanted[0].property if wanted else None

    @property
    def kinds(self) -> frozenset[Kind]:
        """Every kind its findings show (its keys' causes, told by the findings a moved clock
        showed too)."""
        doubted = self.check.unconfirmed if self.check and not self.moved_clock else []
        return kinds_of(self.failing_findings, doubted)

    def shows(self, wanted: frozenset[Kind]) -> bool:
        """Does it show one of the ``wanted`` kinds (a harness error shows none)?"""
        return bool(self.kinds & wanted)

    @property
    def failing_findings(self) -> list[Finding]:
        if self.check is None:
            return []
        return self.check.unconfirmed if self.moved_clock else self.check.findings

    @property
    def operations(self) -> int:
        """The drawn steps: what shrinking minimises (settling is derived, not drawn)."""
        return sum(1 for s in self.steps if not s.settle)

    @property
    def actions(self) -> list[A]:
        """The drawn steps' actions, in order: what a shorter candidate is made from."""
        return [s.action for s in self.steps if not s.settle and s.action is not None]

    @property
    def rank(self) -> tuple[bool, int, bool, int, int]:
        """Findings before harness errors, then fewer steps, then safety before conformance
        (reports lead with safety), then the later (more shrunk)."""
        findings = self.failing_findings
        first = findings[0] if findings else None
        return (first is None, self.operations, first is None or first.klass != "safety",
                int(first.property[1:]) if first else 0, -self.sequence)

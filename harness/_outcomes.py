"""The results of a run, and the stream of events a run emits while it works.

Report formats are handlers over this stream (schemathesis's ``EventHandler``): the console,
the report directory, the HTML page each consume the same events and judge nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness._checker import CheckResult
from harness._findings import Finding, Note, Verdict, merge_verdicts
from harness._history import Event
from harness._target import Target

__all__ = [
    "Handler",
    "RunEvent",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "ScenarioFinished",
    "ScenarioOutcome",
    "ScenarioStarted",
    "Step",
]


@dataclass(frozen=True)
class ScenarioOutcome:
    """One scenario's run: its history and the checker's judgement (or why there is none)."""

    name: str
    verdict: Verdict
    properties: tuple[str, ...]
    check: CheckResult | None = None
    reason: str | None = None
    events: tuple[Event, ...] = ()
    seconds: float = 0.0

    @property
    def findings(self) -> list[Finding]:
        return self.check.findings if self.check else []

    @property
    def notes(self) -> list[Note]:
        return self.check.notes if self.check else []


@dataclass(frozen=True)
class RunResult:
    target: Target
    outcomes: Sequence[ScenarioOutcome]
    seed: int
    started_at: str
    report_dir: Path | None
    retry_horizon: float
    seconds: float = 0.0
    complete: bool = True
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def verdict(self) -> Verdict:
        """``pass`` only when every scenario that could run held; n/a never fails a run."""
        merged = merge_verdicts(o.verdict for o in self.outcomes)
        return "pass" if merged in ("pass", "n/a") else "fail"

    @property
    def findings(self) -> list[Finding]:
        return [f for o in self.outcomes for f in o.findings]

    @property
    def exit_code(self) -> int:
        return 0 if self.verdict == "pass" else 1


@dataclass(frozen=True)
class RunStarted:
    target: Target
    scenarios: tuple[str, ...]
    seed: int
    report_dir: Path | None


@dataclass(frozen=True)
class ScenarioStarted:
    name: str
    position: int
    total: int


@dataclass(frozen=True)
class Step:
    """An event appended to the running scenario's history, as it happens."""

    scenario: str
    event: Event


@dataclass(frozen=True)
class ScenarioFinished:
    outcome: ScenarioOutcome
    partial: RunResult


@dataclass(frozen=True)
class RunFinished:
    result: RunResult


RunEvent = RunStarted | ScenarioStarted | Step | ScenarioFinished | RunFinished


class Handler(Protocol):
    def handle(self, event: RunEvent) -> None: ...

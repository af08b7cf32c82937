"""The results of a run, and the stream of events a run emits while it works.

Report formats are handlers over this stream (schemathesis's ``EventHandler``): the console,
the report directory, the HTML page each consume the same events and judge nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from harness._history import Event
from harness._target import Target
from harness.judging._checker import CheckResult
from harness.judging._findings import Finding, Note, Verdict, merge_verdicts

__all__ = [
    "EXIT_CODES",
    "SIGNAL_EXIT",
    "Handler",
    "Progress",
    "RunEvent",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "RunVerdict",
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


#: A run's verdict: ``pass`` (every scenario that could run held), ``fail`` (a finding),
#: ``inconclusive`` (no finding, but something could not be judged: the reasons are printed),
#: ``incomplete`` (the run stopped before its last scenario: never a pass).
RunVerdict = Literal["pass", "fail", "inconclusive", "incomplete"]
#: Exit codes by verdict; 2 is a usage or setup error, decided before a run starts.  An
#: interrupted run exits as the shell reports a signal: 128 + its number.
EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "inconclusive": 3}
SIGNAL_EXIT = {"SIGINT": 130, "SIGTERM": 143}


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
    #: Every scenario the run meant to play, so an incomplete run can list what it left out.
    planned: tuple[str, ...] = ()
    #: The signal that stopped the run early (``SIGINT``, ``SIGTERM``), if one did.
    stopped_by: str | None = None

    @property
    def verdict(self) -> RunVerdict:
        """Never ``pass`` unless complete; an unknown scenario makes it ``inconclusive``, never
        ``fail`` (a failure is a finding); n/a never fails a run, but a run in which every
        scenario was n/a exercised nothing, and a gate must not pass on nothing: that is
        ``inconclusive`` too."""
        if not self.complete:
            return "incomplete"
        merged = merge_verdicts(o.verdict for o in self.outcomes)
        if merged == "fail":
            return "fail"
        return "inconclusive" if merged in ("unknown", "n/a") else "pass"

    @property
    def exercised_nothing(self) -> bool:
        """Did the run finish without any scenario that could run (every one n/a, or none)?"""
        return self.complete and all(o.verdict == "n/a" for o in self.outcomes)

    @property
    def unfinished(self) -> tuple[str, ...]:
        """The planned scenarios that have no outcome."""
        done = {o.name for o in self.outcomes}
        return tuple(name for name in self.planned if name not in done)

    @property
    def findings(self) -> list[Finding]:
        return [f for o in self.outcomes for f in o.findings]

    @property
    def exit_code(self) -> int:
        if self.verdict == "incomplete":
            return SIGNAL_EXIT.get(self.stopped_by or "", SIGNAL_EXIT["SIGINT"])
        return EXIT_CODES[self.verdict]


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
class Progress:
    """Where a long scenario stands: the explorer's phase (``drawing``, ``shrinking``,
    ``minimising``) and how many examples it has run, for the live line."""

    scenario: str
    phase: str
    examples: int


@dataclass(frozen=True)
class ScenarioFinished:
    outcome: ScenarioOutcome
    partial: RunResult


@dataclass(frozen=True)
class RunFinished:
    result: RunResult


RunEvent = RunStarted | ScenarioStarted | Step | Progress | ScenarioFinished | RunFinished


class Handler(Protocol):
    def handle(self, event: RunEvent) -> None: ...

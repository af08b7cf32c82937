"""An exploration or a replay as a run result, so every report handler renders it unchanged.

The explorer is one scenario in the run's terms: ``explore`` with the failing story's history
and its findings, or nothing at all when no story failed.  Each finding's reproduction is the
``idem-harness replay`` line, because the story, not one request, is what reproduces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness._history import Event
from harness._outcomes import ScenarioOutcome
from harness.explore._failure import Failure
from harness.explore._scenario import EXPLORER
from harness.judging._checker import PROPERTIES, CheckResult, PropertyResult
from harness.judging._findings import Note, Verdict

__all__ = ["outcome_name", "outcome_of", "replay_line"]


def outcome_name(number: int) -> str:
    """The ``number``-th kept failure's outcome: ``explore``, then ``explore-2``..."""
    return EXPLORER.name if number == 1 else f"{EXPLORER.name}-{number}"


def replay_line(story_path: Path | None) -> str:
    return f"idem-harness replay {story_path}" if story_path is not None else ""


def _with_replay(check: CheckResult, line: str, notes: Sequence[Note]) -> CheckResult:
    results = {
        pid: PropertyResult(r.property, r.verdict,
                            tuple(replace(f, reproduce=line) for f in r.findings), r.notes,
                            r.reason)
        for pid, r in check.results.items()
    }
    return replace(check, results=results,
                   findings=[replace(f, reproduce=line) for f in check.findings],
                   notes=[*check.notes, *notes], unconfirmed=[])


def outcome_of(failure: Failure[Any] | None, *, doubt: str | None, seconds: float,
               story_path: Path | None, kept: Sequence[Event] = (),
               name: str = EXPLORER.name, notes: Sequence[Note] = (),
               summary: dict[str, Any] | None = None) -> ScenarioOutcome:
    """The scenario outcome for a failing story, or for a run in which none failed: then
    ``kept``, every example's history, is its history, so the report shows what was sent, and
    ``summary`` what the checker tallied over every example (a queue consumer's account), and
    ``doubt`` (``StorySession.doubt``) why it cannot pass.  ``notes`` are the exploration's
    own (findings seen only with a moved clock, examples counted as not run)."""
    properties = tuple(PROPERTIES.ids())
    if failure is None:
        verdict: Verdict = "unknown" if doubt else "pass"
        reason = f"the checker could not decide: {doubt}" if doubt else None
        check = (CheckResult({}, [], list(notes), summary=summary or {})
                 if notes or summary else None)
        return ScenarioOutcome(name, verdict, properties, check, reason=reason,
                               events=tuple(kept), seconds=seconds)
    check = (_with_replay(failure.check, replay_line(story_path), notes) if failure.check
             else None)
    verdict = "fail" if check and check.findings else "unknown"
    return ScenarioOutcome(name, verdict, properties, check, failure.error, failure.events,
                           seconds)

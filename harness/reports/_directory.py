"""The report directory handler: after every scenario and at the end, rewrite the files, each
atomically, so a run that dies half-way still leaves everything it had finished."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness._outcomes import RunEvent, RunFinished, RunResult, ScenarioFinished
from harness.reports._files import write_atomic
from harness.reports._junit import render_junit
from harness.reports._results import render_history, render_results

__all__ = ["Renderer", "ReportDirectory", "write_report"]

#: A report file: its name in the directory and the function that renders it.
Renderer = tuple[str, Callable[[RunResult], str]]

RENDERERS: list[Renderer] = [
    ("history.jsonl", render_history),
    ("results.json", render_results),
    ("junit.xml", render_junit),
]


def write_report(result: RunResult, directory: Path) -> None:
    """Write every report file for ``result``; results.json goes after the history it cites."""
    for name, render in RENDERERS:
        write_atomic(directory / name, render(result))


class ReportDirectory:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, ScenarioFinished):
            write_report(event.partial, self.directory)
        elif isinstance(event, RunFinished):
            write_report(event.result, self.directory)

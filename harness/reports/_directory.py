"""The report directory handler: rewrite every file after each scenario, all or none.

After every scenario and at the end, the files are rewritten, all of them or none, so a run that
dies half-way still leaves everything it had finished, and a disk that fills up leaves no file
half-written."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from harness._errors import ReportNotWritten
from harness._outcomes import RunEvent, RunFinished, RunResult, ScenarioFinished
from harness.reports._files import write_all
from harness.reports._html import render_index
from harness.reports._junit import render_junit
from harness.reports._results import render_history, render_results
from harness.reports._runview import script_writer, sharing_scripts

__all__ = ["Renderer", "ReportDirectory", "write_report"]

#: A report file: its name in the directory and the function that renders it.
Renderer = tuple[str, Callable[[RunResult], str]]

RENDERERS: list[Renderer] = [
    ("history.jsonl", render_history),
    ("results.json", render_results),
    ("junit.xml", render_junit),
    ("index.html", render_index),
]


def write_report(result: RunResult, directory: Path) -> list[str]:
    """Write every report file for ``result``, all of them or none (``write_all``).

    A renderer that fails costs its own file, never the others or the run: the machine-readable
    record matters more than the page.  Returns what failed, for the caller to say.  A file
    system that refuses the files (full, read-only, not a real one) raises
    ``ReportNotWritten``, and the files stay as they were.
    """
    failed = []
    files: dict[Path, str] = {}
    for name, render in RENDERERS:
        try:
            files[directory / name] = render(result)
        except Exception as exc:  # a report bug must not lose the run's evidence
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    scripts: dict[Path, str] = {}
    try:
        scripts = _scripts(result, directory / "reproduce")
    except Exception as exc:  # as above: a script bug costs the scripts, not the run
        failed.append(f"reproduce/: {type(exc).__name__}: {exc}")
    try:
        write_all({**files, **scripts}, executable=frozenset(scripts))
    except OSError as exc:
        raise ReportNotWritten(str(directory), exc.strerror or str(exc)) from exc
    _remove_stale(directory / "reproduce", keep=scripts)
    return failed


def _scripts(result: RunResult, directory: Path) -> dict[Path, str]:
    """One executable reproduction per script the findings name (one per key: its findings
    share it)."""
    scripts: dict[Path, str] = {}
    for outcome in result.outcomes:
        groups = sharing_scripts(outcome.findings)
        if not groups:
            continue
        write = script_writer(result, outcome)
        for line, findings in groups.items():
            path = directory / Path(shlex.split(line)[-1]).name
            if path not in scripts:
                scripts[path] = write(findings)
    return scripts


def _remove_stale(directory: Path, *, keep: dict[Path, str]) -> None:
    """Scripts of an earlier run in this directory go, so none can be taken for this run's."""
    if directory.is_dir():
        for stale in directory.glob("*.sh"):
            if stale not in keep:
                stale.unlink()


class ReportDirectory:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._reported: set[str] = set()

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, ScenarioFinished | RunFinished):
            result = event.partial if isinstance(event, ScenarioFinished) else event.result
            for failure in write_report(result, self.directory):
                if failure not in self._reported:
                    self._reported.add(failure)
                    print(f"warning: report file not written: {failure}", file=sys.stderr)

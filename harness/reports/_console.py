"""The terminal: progress while a run works, then a summary table, safety findings first."""

from __future__ import annotations

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from harness._durations import format_duration
from harness._outcomes import (
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    ScenarioFinished,
    ScenarioOutcome,
    ScenarioStarted,
    Step,
)

__all__ = ["ConsoleReport", "summary_table"]

VERDICT_STYLE = {"pass": "green", "fail": "bold red", "unknown": "yellow", "n/a": "dim"}


def _verdict(verdict: str) -> Text:
    return Text(verdict, style=VERDICT_STYLE.get(verdict, ""))


def summary_table(result: RunResult) -> Table:
    table = Table(title=f"idem-harness: {result.target.name}", title_justify="left")
    table.add_column("scenario")
    table.add_column("verdict")
    table.add_column("requests", justify="right")
    table.add_column("findings")
    table.add_column("time", justify="right")
    for outcome in result.outcomes:
        requests = sum(1 for e in outcome.events if e.f == "request" and e.type == "invoke")
        found = ", ".join(sorted({f.property for f in outcome.findings})) or (
            outcome.reason if outcome.verdict in ("n/a", "unknown") else "")
        table.add_row(outcome.name, _verdict(outcome.verdict), str(requests), found or "",
                      f"{outcome.seconds:.1f}s")
    return table


class ConsoleReport:
    """Shows a live line for the running scenario; ``quiet`` keeps only the summary."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self._live: Live | None = None
        self._current = ""
        self._requests = 0
        self._position = ""

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.console.print(
                f"[bold]idem-harness[/] target [cyan]{event.target.name}[/] · "
                f"{len(event.scenarios)} scenario(s) · seed {event.seed}"
                + (f" · report {event.report_dir}" if event.report_dir else ""))
        elif isinstance(event, ScenarioStarted):
            self._current, self._requests = event.name, 0
            self._position = f"[{event.position + 1}/{event.total}]"
            if not self.quiet and self.console.is_terminal:
                self._live = Live(self._status(), console=self.console, transient=True,
                                  refresh_per_second=8)
                self._live.start()
        elif isinstance(event, Step):
            if event.event.f == "request" and event.event.type == "invoke":
                self._requests += 1
                if self._live is not None:
                    self._live.update(self._status())
        elif isinstance(event, ScenarioFinished):
            self._stop_live()
            if not self.quiet:
                self._line(event.outcome)
        elif isinstance(event, RunFinished):
            self._summary(event.result)

    def _status(self) -> Text:
        return Text(f"{self._position} {self._current}: {self._requests} requests sent …",
                    style="cyan")

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _line(self, outcome: ScenarioOutcome) -> None:
        line = Text(f"{self._position} {outcome.name} ")
        line.append_text(_verdict(outcome.verdict))
        if outcome.reason:
            line.append(f"  ({outcome.reason})", style="dim")
        self.console.print(line)

    def _summary(self, result: RunResult) -> None:
        self.console.print()
        self.console.print(summary_table(result))
        for finding in result.findings:
            style = "bold red" if finding.klass == "safety" else "yellow"
            self.console.print(Text(f"{finding.property} {finding.klass}", style=style),
                               Text(f" {finding.key or ''}"))
            self.console.print(f"  {finding.message}", soft_wrap=True, highlight=False)
            if finding.reproduce:
                self.console.print(f"  reproduce: {finding.reproduce}", style="dim",
                                   soft_wrap=True, highlight=False)
        verdict = result.verdict
        self.console.print(
            Text(f"\n{verdict.upper()}", style=VERDICT_STYLE[verdict]),
            Text(f" · {len(result.findings)} finding(s) in {format_duration(result.seconds)}"
                 + (f" · report in {result.report_dir}" if result.report_dir else "")),
        )

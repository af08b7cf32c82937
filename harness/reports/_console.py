"""The terminal: progress while a run works, then a summary table, safety findings first."""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from harness._durations import format_duration
from harness._outcomes import (
    Progress,
    RunEvent,
    RunFinished,
    RunResult,
    RunStarted,
    ScenarioFinished,
    ScenarioOutcome,
    ScenarioStarted,
    Step,
)
from harness._target import Target
from harness.judging._findings import Finding
from harness.reports._results import requests_sent, run_account
from harness.reports._runview import by_key, row_verdict

__all__ = ["ConsoleReport", "account_lines", "summary_table"]

VERDICT_STYLE = {"pass": "green", "fail": "bold red", "unknown": "yellow", "n/a": "dim",
                 "inconclusive": "bold yellow", "incomplete": "bold yellow"}


def _verdict(verdict: str) -> Text:
    return Text(verdict, style=VERDICT_STYLE.get(verdict, ""))


def unknown_reason(outcome: ScenarioOutcome) -> str:
    """Why a scenario has no verdict: its own reason, then each undecided property's."""
    reasons = [outcome.reason] if outcome.reason else []
    if outcome.check is not None:
        reasons += [f"{pid}: {r.reason}" for pid, r in outcome.check.results.items()
                    if r.verdict == "unknown" and r.reason]
    return "; ".join(reasons) or "no reason was recorded"


def summary_table(result: RunResult) -> Table:
    table = Table(title=f"idem-harness: {result.target.name}", title_justify="left")
    table.add_column("scenario")
    table.add_column("verdict")
    table.add_column("requests", justify="right")
    table.add_column("findings")
    table.add_column("time", justify="right")
    for outcome in result.outcomes:
        found = ", ".join(sorted({f.property for f in outcome.findings})) or (
            escape(outcome.reason or "") if outcome.verdict in ("n/a", "unknown") else "")
        table.add_row(outcome.name, _verdict(row_verdict(result, outcome)),
                      str(requests_sent(outcome)), found,
                      f"{outcome.seconds:.1f}s")
    return table


def account_lines(account: dict[str, object]) -> list[str]:
    """A queue account in two lines: what happened to the messages, then to the jobs."""
    outcomes: dict[str, int] = account["outcomes"]  # type: ignore[assignment]
    fractions: dict[str, float] = account["fractions"]  # type: ignore[assignment]
    seen = (f"{account['delivered']} delivered ({account['redelivered']} redelivered) · "
            f"{account['acked']} acked" if account["delivered"] is not None
            else "deliveries and acks not reported (no events feed)")
    first = (f"queue account: {account['keys']} job(s) · {account['published']} published, "
             f"{account['confirmed']} confirmed · {seen} · {account['dead_lettered']} "
             f"dead-lettered · {account['effects']} effect(s)")
    second = "  " + " · ".join(
        f"{name} {outcomes[name]}" + (f" ({fractions[name]:.0%})" if outcomes[name] else "")
        for name in ("ok", "lost", "duplicated", "recovered", "unexpected", "unsettled",
                     "unknown") if outcomes[name] or name in ("lost", "duplicated"))
    return [first, second]


class ConsoleReport:
    """Shows a live line for the running scenario; ``quiet`` keeps only the summary."""

    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.quiet = quiet
        self._live: Live | None = None
        self._current = ""
        self._requests = 0
        self._unanswered = 0
        self._faults: list[str] = []
        self._clock = 0.0
        self._down = False
        self._started = time.monotonic()
        self._done, self._total = 0, 0
        self._position = ""
        self._phase = ""
        self._examples = 0
        self._running: dict[str, str] = {}  # scenarios run at once: name -> "[n/N]"

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.console.print(
                f"[bold]idem-harness[/] target [cyan]{event.target.name}[/] · "
                f"{len(event.scenarios)} scenario(s) · seed {event.seed}"
                + (f" · report {event.report_dir}" if event.report_dir else ""))
            self._default_endpoint(event.target)
        elif isinstance(event, ScenarioStarted):
            self._current, self._requests, self._unanswered = event.name, 0, 0
            self._faults, self._clock, self._down = [], 0.0, False
            self._phase, self._examples = "", 0
            self._started = time.monotonic()
            self._done, self._total = event.position, event.total
            self._position = f"[{event.position + 1}/{event.total}]"
            self._running[event.name] = self._position
            if not self.quiet and self.console.is_terminal and self._live is None:
                self._live = Live(console=self.console, transient=True, refresh_per_second=4,
                                  get_renderable=self._status)
                self._live.start()
        elif isinstance(event, Step):
            self._follow(event)
        elif isinstance(event, Progress):
            self._phase, self._examples = event.phase, event.examples
        elif isinstance(event, ScenarioFinished):
            position = self._running.pop(event.outcome.name, self._position)
            if not self._running:
                self._stop_live()
            if not self.quiet:
                self._line(event.outcome, position, row_verdict(event.partial, event.outcome))
        elif isinstance(event, RunFinished):
            self._summary(event.result)

    def _default_endpoint(self, target: Target) -> None:
        """A target file without ``[endpoint]`` means the default request; say which, since
        a service with another route would otherwise answer 404 to a whole run."""
        if getattr(target, "kind", "http") != "http" or target.declares_endpoint:
            return
        endpoint = target.endpoint
        self.console.print(
            Text("note", style="yellow"),
            Text(f": {target.source or target.name} has no [endpoint], so every request is the "
                 f"default {endpoint.method} {endpoint.path} with the body "
                 f"{json.dumps(endpoint.body)}; declare [endpoint] (method, path, body) if the "
                 "service's keyed request is another"), soft_wrap=True)

    def _follow(self, step: Step) -> None:
        """Keep the live line's counters: requests, lost answers, faults acting, clock."""
        event = step.event
        if event.f == "request":
            if event.type == "invoke":
                self._requests += 1
            elif event.status is None:
                self._unanswered += 1
        elif event.f == "fault":
            self._faults.append(str(event.value.get("fault")))
        elif event.f == "heal" and str(event.value.get("fault")) in self._faults:
            self._faults.remove(str(event.value.get("fault")))
        elif event.f == "clock":
            self._clock += float(event.value.get("seconds", 0.0))
        elif event.f in ("crash", "restart"):
            self._down = event.f == "crash"

    def _status(self) -> Text:
        """``[3/10] ━━━━──── in-flight-retry · 3 requests · fault response-timeout · 1.2s``
        (the explorer adds its phase and example count: ``explore · shrinking · example 12``);
        redrawn by the live display, so the time moves while a request hangs."""
        width = 12
        filled = round(width * self._done / self._total) if self._total else 0
        line = Text(f"{self._position} ", style="cyan")
        line.append("━" * filled, style="green")
        line.append("─" * (width - filled), style="dim")
        line.append(f" {self._current}", style="bold cyan")
        if self._phase:
            line.append(f" · {self._phase} · example {self._examples}", style="cyan")
        line.append(f" · {self._requests} request{'' if self._requests == 1 else 's'}")
        if self._unanswered:
            line.append(f" ({self._unanswered} unanswered)", style="yellow")
        if self._faults:
            line.append(f" · fault {', '.join(self._faults)}", style="magenta")
        if self._down:
            line.append(" · server down", style="red")
        if self._clock:
            line.append(f" · target clock +{format_duration(self._clock)}", style="blue")
        line.append(f" · {time.monotonic() - self._started:.1f}s", style="dim")
        return line

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _line(self, outcome: ScenarioOutcome, position: str, verdict: str) -> None:
        line = Text(f"{position} {outcome.name} ")
        line.append_text(_verdict(verdict))
        if outcome.reason:
            line.append(f"  ({outcome.reason})", style="dim")  # Text: no markup parsing
        self.console.print(line)

    def _summary(self, result: RunResult) -> None:
        self.console.print()
        self.console.print(summary_table(result))
        account = run_account(result)
        if account:
            for line in account_lines(account):
                self.console.print(line, soft_wrap=True, highlight=False)
        keys = 0
        for outcome in result.outcomes:
            for group in by_key(outcome.findings):
                keys += 1
                self._key(outcome.name, group)
        for outcome in result.outcomes:
            if outcome.verdict == "unknown":
                self.console.print(Text(f"unknown {outcome.name}", style="yellow"),
                                   Text(f": {unknown_reason(outcome)}"), soft_wrap=True)
        if result.exercised_nothing:
            self.console.print(Text("nothing was exercised", style="yellow"),
                               Text(": every scenario was not applicable to this target (each "
                                    "says what it needs), so the run cannot pass"),
                               soft_wrap=True)
        if result.unfinished:
            self.console.print(Text("not run", style="yellow"),
                               Text(f": {', '.join(result.unfinished)}"), soft_wrap=True)
        verdict = result.verdict
        found = len(result.findings)
        on = f" on {keys} key(s)" if keys != found else ""
        self.console.print(
            Text(f"\n{verdict.upper()}", style=VERDICT_STYLE[verdict]),
            Text(f" · {found} finding(s){on} in {format_duration(result.seconds)}"
                 + (f" · report in {result.report_dir}" if result.report_dir else "")),
        )

    def _key(self, scenario: str, group: list[Finding]) -> None:
        """One key's findings: their properties and class, each message, one reproduction."""
        first = group[0]
        safety = any(f.klass == "safety" for f in group)
        properties = " ".join(dict.fromkeys(f.property for f in group))
        self.console.print(Text(f"{properties} {'safety' if safety else 'conformance'}",
                                style="bold red" if safety else "yellow"),
                           Text(f" in {scenario}"), Text(f" {first.key or ''}", style="dim"))
        for finding in group:
            said = f"{finding.property}: " if len(group) > 1 else ""
            self.console.print(f"  {said}{finding.message}", soft_wrap=True, highlight=False)
        if first.reproduce:
            self.console.print(f"  reproduce: {first.reproduce}", style="dim", soft_wrap=True,
                               highlight=False)

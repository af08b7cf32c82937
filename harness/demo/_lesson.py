"""One training demo: a flaw's scenario, run with the flaw and without it, narrated.

The scenario that exposes a flaw, run against the reference server (or the reference consumer,
on its broker) with the flaw and then without it, narrated as it happens, and written as a
report with a training page.

Both runs are ordinary runs through the runner, with the same seed and one shared Toxiproxy; the
demo adds a narrator and a page, and judges nothing: the checker's findings are the lesson.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.text import Text

from harness._errors import UsageError
from harness._front import front_for
from harness._outcomes import RunResult
from harness._runner import RunConfig, run_scenarios
from harness._scenario import Scenario
from harness._target import Target
from harness.demo._modes import ARTICLE, FailureMode
from harness.demo._narrator import Narrator
from harness.judging._findings import Finding, klass_of
from harness.reports import Lesson, ReportDirectory, render_lesson_html, write_atomic
from harness.reports._console import unknown_reason
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.targets._reference import reference_target

__all__ = ["DemoResult", "run_demo"]


@dataclass(frozen=True)
class DemoResult:
    mode: FailureMode
    flawed: RunResult
    fixed: RunResult
    report_dir: Path

    @property
    def caught(self) -> list[Finding]:
        """The flawed run's findings of a property the flaw is known to break."""
        return [f for f in self.flawed.findings if f.property in self.mode.flaw.properties]

    @property
    def as_expected(self) -> bool:
        """The flaw was caught as what it breaks, and the correct server held."""
        return bool(self.caught) and self.fixed.verdict == "pass"

    @property
    def page(self) -> Path:
        return self.report_dir / "index.html"


def _reference(flaw: str | None, *, crash_point: str | None = None,
               broker: str | None = None) -> Target:
    """The built-in reference target file (the reference consumer's on ``broker``), started
    with ``--flaw`` when one is given, and offering only ``crash_point`` of its crash hook when
    one is given."""
    if broker is not None:
        from harness.consumer._reference import reference_consumer_target

        return reference_consumer_target(store=None, flaw=flaw,
                                         broker="kafka" if broker == "kafka" else "rabbitmq")
    target = reference_target(store=None, flaw=flaw)
    crash = target.hooks.crash
    if crash_point is not None and crash is not None:
        points = {p: v for p, v in crash.points.items() if p == crash_point}
        hooks = target.hooks.model_copy(update={"crash": crash.model_copy(
            update={"points": points})})
        target = target.model_copy(update={"hooks": hooks})
    return target


def run_demo(mode: FailureMode, *, report_dir: Path, console: Console, seed: int | None = None,
             toxiproxy: ToxiproxyServer | None = None) -> DemoResult:
    """Show ``mode``: narrate the flawed run, then the correct one, then write the pages."""
    from scenarios import get_scenario

    if mode.scenario is None:
        raise UsageError(f"no scenario in the catalog exposes {mode.name} yet (the flaw matrix "
                         "shows it held everywhere), so there is nothing to show; "
                         "`idem-harness demo --list` names the ones that can be shown")
    scenario = get_scenario(mode.scenario)
    seed = seed if seed is not None else random.SystemRandom().randrange(2**32)
    _introduce(console, mode, scenario)
    which = "reference server" if mode.broker is None else "reference consumer"
    with ExitStack() as stack:
        proxy = toxiproxy or stack.enter_context(start_toxiproxy(log_dir=report_dir))
        # what both runs share (a consumer's one broker, started once)
        stack.enter_context(front_for(_reference(None, broker=mode.broker)).matrix_services())
        console.rule(f"[bold red]with the flaw[/] · {which} --flaw {mode.name}")
        flawed = _run(_reference(mode.name, crash_point=mode.crash_point, broker=mode.broker),
                      scenario, report_dir / "flawed", seed, proxy, console)
        console.rule(f"[bold green]with the fix[/] · the correct {which}")
        fixed = _run(_reference(None, crash_point=mode.crash_point, broker=mode.broker),
                     scenario, report_dir / "fixed", seed, proxy, console)
    result = DemoResult(mode, flawed, fixed, report_dir)
    lesson = Lesson(mode.name, mode.summary, mode.paragraphs, mode.pitfall, scenario.name,
                    scenario.story, scenario.plan)
    write_atomic(result.page, render_lesson_html(lesson, flawed, fixed,
                                                 flawed_href="flawed/index.html",
                                                 fixed_href="fixed/index.html"))
    _conclude(console, result)
    return result


def _run(target: Target, scenario: Scenario, report_dir: Path, seed: int,
         toxiproxy: ToxiproxyServer, console: Console) -> RunResult:
    config = RunConfig(target=target, scenarios=[scenario], report_dir=report_dir, seed=seed,
                       toxiproxy=toxiproxy)
    narrator = Narrator(console, target=target)
    return run_scenarios(config, [narrator, ReportDirectory(report_dir)])


def _introduce(console: Console, mode: FailureMode, scenario: Scenario) -> None:
    body = Text()
    body.append(mode.summary + "\n", style="bold")
    for paragraph in mode.paragraphs:
        body.append("\n" + paragraph + "\n")
    if mode.pitfall:
        body.append(f'\nA common mistake, in the words of "{ARTICLE}": ',
                    style="bold magenta")
        body.append(mode.pitfall + "\n", style="magenta")
    body.append(f"\nScenario {scenario.name}: ", style="bold")
    body.append(scenario.story)
    console.print(Panel(body, title=f"failure mode: {mode.name}", title_align="left",
                        border_style="cyan"))


def _conclude(console: Console, result: DemoResult) -> None:
    """Both runs as the run report counts them (every property found, safety first), then
    what the flaw is known to break and whether this run showed it."""
    console.rule("what it showed")
    console.print(_counted("with the flaw: ", result.flawed))
    known = sorted(result.mode.flaw.properties, key=lambda p: int(p[1:]))
    caught = {f.property for f in result.caught}
    shown = Text(f"  {result.mode.name} breaks {_listed(known)}: ", style="dim")
    if caught:
        shown.append(f"caught as {_listed([p for p in known if p in caught])}", style="bold")
        missed = [p for p in known if p not in caught]
        if missed:
            shown.append(f"; {_listed(missed)} not seen in this run", style="dim")
    else:
        shown.append("not caught as any of them in this run", style="bold red")
    console.print(shown)
    console.print(_counted("with the fix:  ", result.fixed))
    console.print(Text("report: ", style="bold") + Text(str(result.page)))


def _counted(label: str, run: RunResult) -> Text:
    """``with the flaw: FAIL · 3 findings: P1 safety x2, P2 safety x1``."""
    style = {"pass": "bold green", "fail": "bold red"}.get(run.verdict, "bold yellow")
    line = Text(label, style="bold") + Text(run.verdict.upper(), style=style)
    count = len(run.findings)
    line.append(f" · {count} finding{'' if count == 1 else 's'}")
    by_property: dict[str, int] = {}
    for finding in run.findings:
        by_property[finding.property] = by_property.get(finding.property, 0) + 1
    ordered = sorted(by_property, key=lambda p: (klass_of(p) != "safety", int(p[1:])))
    if ordered:
        line.append(": ")
        for position, prop in enumerate(ordered):
            line.append(", " if position else "")
            line.append(f"{prop} {klass_of(prop)} x{by_property[prop]}",
                        style="red" if klass_of(prop) == "safety" else "yellow")
    for reason in _unknown_reasons(run):
        line.append(f"\n  unknown: {reason}", style="yellow")
    return line


def _unknown_reasons(run: RunResult) -> list[str]:
    return [f"{o.name}: {unknown_reason(o)}" for o in run.outcomes if o.verdict == "unknown"]


def _listed(properties: Sequence[str]) -> str:
    return ", ".join(properties) if properties else "nothing the checker names"

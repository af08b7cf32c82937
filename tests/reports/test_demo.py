"""The training demo end to end: the real reference server with the flaw and without it, the
real Toxiproxy, the narration a trainee reads and the pages.

One demo goes through the command line as a trainer types it; three more, chosen for what they
teach about order, run through ``run_demo`` at once: concurrent copies (a replay must never be
told before the charge it replays), a crash (the death before the lost answer, and a dead
server's claim never told as a request still running) and a late original past its lease (the
slowed handler told where it is sent, and the gate's story reproducing it).  Every flaw's demo
was read through by hand when the narration changed; these keep the order and the summary
honest.
"""

from __future__ import annotations

import io
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from harness import UsageError
from harness._gate._story import render_story
from harness.cli import main
from harness.demo import DemoResult, FailureMode, failure_mode, failure_modes, run_demo
from harness.services._toxiproxy import ToxiproxyServer
from tests.reports.conftest import DEMO_SEED, DemoRun

pytestmark = pytest.mark.timeout(180)

#: Seconds one demo (both runs, narration and pages) may take on this 2-core machine.
BUDGET = 45.0
#: Concurrent copies, a crash, a late original: the orders a narration can get wrong.
SHOWN = ["check-then-insert", "stuck-after-crash", "no-fencing"]


@dataclass(frozen=True)
class Shown:
    mode: FailureMode
    result: DemoResult
    narration: str
    seconds: float

    def section(self, which: str) -> list[str]:
        """The narrated lines of the flawed or the fixed run."""
        flawed, fixed = self.narration.split("with the fix", 1)
        text = flawed.split("with the flaw", 1)[1] if which == "flawed" else fixed
        return text.split("what it showed", 1)[0].splitlines()


@pytest.fixture(scope="module")
def demos(toxiproxy_server: ToxiproxyServer,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Shown]]:
    base = tmp_path_factory.mktemp("demos")

    def show(name: str) -> Shown:
        mode = failure_mode(name)
        output = io.StringIO()
        started = time.monotonic()
        result = run_demo(mode, report_dir=base / name, seed=DEMO_SEED,
                          console=Console(file=output, width=400, color_system=None),
                          toxiproxy=toxiproxy_server)
        return Shown(mode, result, output.getvalue(), time.monotonic() - started)

    with ThreadPoolExecutor(max_workers=len(SHOWN)) as pool:
        yield {shown.mode.name: shown for shown in pool.map(show, SHOWN)}


def first_line(lines: list[str], phrase: str) -> int:
    return next((n for n, line in enumerate(lines) if phrase in line), -1)


def replays_follow_their_charges(lines: list[str]) -> list[str]:
    """Every replay of a charge told after the line that told the charge being made (a charge
    whose own answer was lost is never told as made, and may be replayed)."""
    wrong = []
    for n, line in enumerate(lines):
        replayed = re.search(r"replayed \((ch_\w+)\)", line)
        if replayed is None:
            continue
        made = first_line(lines, f"charge, {replayed[1]}")
        made = made if made != -1 else first_line(lines, f"charged {replayed[1]}")
        if made > n:
            wrong.append(f"line {n} replays {replayed[1]}, made on line {made}")
    return wrong


@pytest.mark.parametrize("name", SHOWN)
def test_the_demo_catches_the_flaw_and_shows_the_fix_holding(demos: dict[str, Shown],
                                                            name: str) -> None:
    shown = demos[name]
    assert shown.result.flawed.verdict == "fail"
    assert shown.result.caught, (
        f"{name} was not caught as {shown.mode.flaw.properties}: "
        f"{[f.property for f in shown.result.flawed.findings]}")
    assert shown.result.fixed.verdict == "pass", [f.message for f in shown.result.fixed.findings]
    assert shown.result.as_expected
    assert shown.seconds < BUDGET
    for page in ("index.html", "flawed/index.html", "fixed/index.html"):
        assert (shown.result.report_dir / page).is_file()
    assert "<svg class=\"sequence wide\"" in (shown.result.report_dir / "index.html").read_text()


@pytest.mark.parametrize("name", SHOWN)
def test_the_narration_is_told_in_the_order_it_happened(demos: dict[str, Shown],
                                                        name: str) -> None:
    shown = demos[name]
    for which in ("flawed", "fixed"):
        lines = shown.section(which)
        assert first_line(lines, "sends POST /charges") < first_line(lines, "checker: ")
        assert replays_follow_their_charges(lines) == [], (which, lines)


@pytest.mark.parametrize("name", SHOWN)
def test_the_summary_counts_every_property_found(demos: dict[str, Shown], name: str) -> None:
    shown = demos[name]
    counts: dict[str, int] = {}
    for finding in shown.result.flawed.findings:
        counts[finding.property] = counts.get(finding.property, 0) + 1
    summary = shown.narration.split("what it showed", 1)[1]
    total = len(shown.result.flawed.findings)
    assert f"with the flaw: FAIL · {total} finding{'' if total == 1 else 's'}: " in summary
    for prop, count in counts.items():
        assert f"{prop} {'safety' if prop in ('P1', 'P2', 'P8', 'P9') else 'conformance'} " \
               f"x{count}" in summary
    assert "with the fix:  PASS · 0 findings" in summary


def test_concurrent_copies_are_told_with_every_charge_and_the_summary_names_p2(
        demos: dict[str, Shown]) -> None:
    shown = demos["check-then-insert"]
    flawed = shown.section("flawed")
    assert first_line(flawed, "ANOTHER charge") > first_line(flawed, "answered with a new charge")
    assert first_line(flawed, "charges for one operation") != -1
    assert {"P1", "P2"} <= {f.property for f in shown.result.flawed.findings}
    assert "P2 safety x" in shown.narration.split("what it showed", 1)[1]


def test_a_crash_is_told_before_the_answer_it_cost_and_its_claim_is_not_running(
        demos: dict[str, Shown]) -> None:
    shown = demos["stuck-after-crash"]
    for which in ("flawed", "fixed"):
        lines = shown.section(which)
        sent = first_line(lines, "set to kill the server after-claim")
        died = first_line(lines, "the server process dies")
        lost = first_line(lines, "the server died with the request in it")
        assert -1 < sent < died < lost, lines
        claimed = first_line(lines, "409 Conflict")
        assert "the request that claimed it died with the server" in lines[claimed]
        assert not any("with this key is running" in line or "with this key are running" in line
                       for line in lines)
    assert any("its lease of 30s has run out" in line for line in shown.section("flawed"))


def test_a_late_original_is_told_slowed_and_its_story_reproduces_it(
        demos: dict[str, Shown]) -> None:
    shown = demos["no-fencing"]
    lines = shown.section("flawed")
    assert "its handler slowed by 1200 ms" in lines[first_line(lines, "sends POST /charges")]
    assert first_line(lines, "past the promised lease of 30s") < first_line(lines, "takeover")
    (outcome,) = shown.result.flawed.outcomes
    p1 = next(f for f in outcome.findings if f.property == "P1")
    assert "still running past its lease of 30s" in p1.message
    target = shown.result.flawed.target
    story = render_story(p1, outcome.events, target).splitlines()
    assert any(line.startswith("o1 = state.send_in_background(") and "X-Test-Delay-Ms" in line
               for line in story), story
    assert [line for line in story if line.startswith("k")] == [story[1]]  # one key variable
    assert story[-2].startswith("state.charges(key=k1)") and "-> 2:" in story[-2]


def test_the_command_line_demo_tells_the_seed_story(demo_run: DemoRun) -> None:
    output = demo_run.process.stdout
    assert demo_run.process.returncode == 0, demo_run.process.stderr + output
    in_order = ["failure mode: server-generated-key", "c0 sends POST /charges",
                "the response was lost on its way back", "c0 retries POST /charges",
                "c0 gets 201", "not a replay", "charges for one operation", "checker: FAIL",
                "with the fix", "the stored response, replayed", "checker: PASS",
                "with the flaw: FAIL · 3 findings: P1 safety x3",
                "server-generated-key breaks P1, P3: caught as P1; P3 not seen in this run",
                "with the fix:  PASS · 0 findings", "report: "]
    positions = [output.find(phrase) for phrase in in_order]
    assert -1 not in positions, dict(zip(in_order, positions, strict=True))
    assert positions == sorted(positions)
    for page in ("index.html", "flawed/index.html", "fixed/index.html",
                 "flawed/results.json", "fixed/junit.xml"):
        assert (demo_run.directory / page).is_file()


def test_the_list_names_every_flaw_once_with_what_shows_it() -> None:
    result = CliRunner().invoke(main, ["demo", "--list"])
    assert result.exit_code == 0, result.output
    *lines, article = result.output.splitlines()
    assert len(lines) == len(failure_modes())
    for mode, line in zip(failure_modes(), lines, strict=True):
        assert line.startswith(mode.name) and mode.summary in line
        assert f"scenario {mode.scenario}" in line if mode.scenario else "no scenario" in line
    assert any('the article\'s common mistake "TTL too short"' in line for line in lines)
    assert "seed" not in result.output  # it read as the random seed
    assert "Idempotency Keys in Distributed Systems" in article


def test_a_flaw_no_scenario_exposes_is_refused_with_the_reason(tmp_path: Path) -> None:
    unexposed = replace(failure_mode("no-fencing"), scenario=None)
    with pytest.raises(UsageError, match="no scenario in the catalog exposes no-fencing"):
        run_demo(unexposed, report_dir=tmp_path, console=Console(file=io.StringIO()))
    result = CliRunner().invoke(main, ["demo", "no-such-flaw"])
    assert result.exit_code == 2
    assert "server-generated-key" in result.output

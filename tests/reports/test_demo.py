"""The training demo of every failure mode, end to end: the real reference server with the flaw
and without it, the real Toxiproxy, the narration and the pages.

One demo goes through the command line as a trainer types it; the others run through
``run_demo`` three at a time (their waits on Retry-After overlap), each within a small budget.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from harness import UsageError
from harness._toxiproxy import ToxiproxyServer
from harness.cli import main
from harness.demo import DemoResult, FailureMode, failure_mode, failure_modes, run_demo
from tests.reports.conftest import DEMO_SEED, DemoRun

pytestmark = pytest.mark.timeout(240)

#: Seconds one demo (both runs, narration and pages) may take on this 2-core machine.
BUDGET = 60.0
#: The demo through the command line; the others run in-process.
CLI_DEMO = "server-generated-key"
SHOWN = [m.name for m in failure_modes() if m.scenario is not None and m.name != CLI_DEMO]
@dataclass(frozen=True)
class Shown:
    mode: FailureMode
    result: DemoResult
    narration: str
    seconds: float


@pytest.fixture(scope="module")
def demos(toxiproxy_server: ToxiproxyServer,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Shown]]:
    base = tmp_path_factory.mktemp("demos")

    def show(name: str) -> Shown:
        mode = failure_mode(name)
        output = io.StringIO()
        started = time.monotonic()
        result = run_demo(mode, report_dir=base / name, seed=DEMO_SEED,
                          console=Console(file=output, width=140, color_system=None),
                          toxiproxy=toxiproxy_server)
        return Shown(mode, result, output.getvalue(), time.monotonic() - started)

    with ThreadPoolExecutor(max_workers=3) as pool:
        yield {shown.mode.name: shown for shown in pool.map(show, SHOWN)}


@pytest.mark.parametrize("name", SHOWN)
def test_the_demo_catches_the_flaw_as_what_it_breaks(demos: dict[str, Shown], name: str) -> None:
    shown = demos[name]
    assert shown.result.flawed.verdict == "fail"
    assert shown.result.caught, (
        f"{name} was not caught as {shown.mode.flaw.properties}: "
        f"{[f.property for f in shown.result.flawed.findings]}")
    assert shown.seconds < BUDGET


@pytest.mark.parametrize("name", SHOWN)
def test_the_demo_shows_the_fix_holding(demos: dict[str, Shown], name: str) -> None:
    result = demos[name].result
    assert result.fixed.verdict == "pass", [f.message for f in result.fixed.findings]
    assert result.as_expected


@pytest.mark.parametrize("name", SHOWN)
def test_the_demo_narrates_each_step_and_writes_its_pages(demos: dict[str, Shown],
                                                          name: str) -> None:
    shown = demos[name]
    narration = shown.narration
    assert "with the flaw" in narration and "with the fix" in narration
    assert "sends POST /charges" in narration
    assert "checker: FAIL" in narration
    assert "the ledger holds" in narration
    if "P1" in {f.property for f in shown.result.caught}:
        assert "charges for one operation" in narration
    for page in ("index.html", "flawed/index.html", "fixed/index.html"):
        assert (shown.result.report_dir / page).is_file()
    assert "<svg class=\"sequence\"" in (shown.result.report_dir / "index.html").read_text()


def test_the_command_line_demo_tells_the_seed_story(demo_run: DemoRun) -> None:
    output = demo_run.process.stdout
    assert demo_run.process.returncode == 0, demo_run.process.stderr + output
    in_order = ["failure mode: server-generated-key", "c0 sends POST /charges",
                "the response was lost on its way back", "c0 retries POST /charges",
                "c0 gets 201", "not a replay", "charges for one operation", "checker: FAIL",
                "with the fix", "the stored response, replayed", "checker: PASS",
                "report: "]
    positions = [output.find(phrase) for phrase in in_order]
    assert -1 not in positions, dict(zip(in_order, positions, strict=True))
    assert positions == sorted(positions)
    for page in ("index.html", "flawed/index.html", "fixed/index.html",
                 "flawed/results.json", "fixed/junit.xml"):
        assert (demo_run.directory / page).is_file()


def test_the_list_names_every_flaw_once_with_what_shows_it() -> None:
    result = CliRunner().invoke(main, ["demo", "--list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert len(lines) == len(failure_modes())
    for mode, line in zip(failure_modes(), lines, strict=True):
        assert line.startswith(mode.name) and mode.summary in line
        assert f"scenario {mode.scenario}" in line if mode.scenario else "no scenario" in line
    assert any("TTL too short" in line for line in lines)


def test_a_flaw_no_scenario_exposes_is_refused_with_the_reason(tmp_path: Path) -> None:
    unexposed = replace(failure_mode("no-fencing"), scenario=None)
    with pytest.raises(UsageError, match="no scenario in the catalog exposes no-fencing"):
        run_demo(unexposed, report_dir=tmp_path, console=Console(file=io.StringIO()))
    result = CliRunner().invoke(main, ["demo", "no-such-flaw"])
    assert result.exit_code == 2
    assert "server-generated-key" in result.output

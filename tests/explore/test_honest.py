"""The explorer is honest when stopped and about what it keeps (issue 23): interrupted at any
moment it still writes its report, marked incomplete, and exits 130/143 without a traceback;
its failing examples live beside the reports, are announced before they are replayed, and a
flag forgets them.  (A queue consumer is explored too: tests/consumer/test_explore.py.)"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from harness._interrupts import Interrupted, interrupt_on_signals
from harness._outcomes import Progress, RunEvent, RunFinished
from harness.explore import ExploreConfig, explore
from harness.explore import _explorer as explorer_module
from harness.reports import ReportDirectory
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target

REPOSITORY = Path(__file__).resolve().parents[2]
#: A flaw found within a handful of examples, whose story then shrinks.
QUICK_FLAW = "key-only"


class StopWhen:
    """A report handler that stops the exploration when ``when`` says so, the way Ctrl-C
    does: by raising ``Interrupted`` where the explorer is at that moment."""

    def __init__(self, when: Callable[[RunEvent], bool]) -> None:
        self.when = when
        self.fired = False

    def handle(self, event: RunEvent) -> None:
        if not self.fired and self.when(event):
            self.fired = True
            raise Interrupted(signal.SIGINT)


def explored(tmp_path: Path, toxiproxy: ToxiproxyServer, flaw: str | None,
             stop: StopWhen) -> dict[str, object]:
    report = tmp_path / "report"
    done = explore(ExploreConfig(target=reference_target(store=None, flaw=flaw),
                                 max_examples=30, seed=1, report_dir=report,
                                 toxiproxy=toxiproxy, shrink_seconds=30),
                   [ReportDirectory(report), stop])
    assert stop.fired and done.result.exit_code == 130
    for name in ("junit.xml", "index.html", "history.jsonl"):
        assert (report / name).exists(), name
    results = json.loads((report / "results.json").read_text())
    assert results["complete"] is False and results["stopped_by"] == "SIGINT"
    assert results["verdict"] == "incomplete"
    return results


def test_stopped_while_drawing_it_reports_what_it_sent_as_incomplete(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    stop = StopWhen(lambda e: isinstance(e, Progress) and e.examples == 3)
    results = explored(tmp_path, toxiproxy_server, None, stop)
    assert results["extra"]["explore"]["found"] is False  # type: ignore[index]
    assert not (tmp_path / "report" / "story.json").exists()


def test_stopped_while_shrinking_it_reports_the_finding_with_its_story_unshrunk(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    # key-only fails in the opening, whose story is shortened by dropping steps ("minimising"),
    # not by Hypothesis
    stop = StopWhen(lambda e: isinstance(e, Progress) and e.phase in ("shrinking", "minimising"))
    results = explored(tmp_path, toxiproxy_server, QUICK_FLAW, stop)
    [scenario] = results["scenarios"]  # type: ignore[index]
    assert scenario["findings"], "the finding made before the stop is reported"
    story = json.loads((tmp_path / "report" / "story.json").read_text())
    assert story["shrunk"] is False and story["property"] == scenario["findings"][0]["property"]


def test_stopped_while_the_report_is_written_it_finishes_writing_and_marks_it_incomplete(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """A real SIGINT that arrives as the last files are written is held back until they are
    whole, then the report is written again, marked incomplete."""
    previous = signal.getsignal(signal.SIGINT)
    interrupt_on_signals()
    try:
        finishes: list[RunEvent] = []

        def sigint_on_finish(event: RunEvent) -> bool:
            if isinstance(event, RunFinished):
                finishes.append(event)
                if len(finishes) == 1:  # held back while the files are written
                    os.kill(os.getpid(), signal.SIGINT)
            return False

        stop = StopWhen(sigint_on_finish)
        report = tmp_path / "report"
        done = explore(ExploreConfig(target=reference_target(store=None, flaw=QUICK_FLAW),
                                     max_examples=30, seed=1, report_dir=report,
                                     toxiproxy=toxiproxy_server, shrink_seconds=5),
                       [ReportDirectory(report), stop])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert done.result.exit_code == 130 and done.story is not None
    assert not stop.fired and len(finishes) == 2  # the report, then again as incomplete
    results = json.loads((report / "results.json").read_text())
    assert results["complete"] is False and results["scenarios"][0]["findings"]
    assert json.loads((report / "story.json").read_text())["shrunk"] is True


def test_a_signal_obeyed_once_does_not_stop_the_next_exploration_in_the_process(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """A real SIGINT stops one exploration; a second one in the same process (a test session,
    the pytest gate) runs to its end: the first signal was delivered once, not kept pending
    (in the suite, explorations after another test's signal stopped at their first example)."""
    previous = signal.getsignal(signal.SIGINT)
    interrupt_on_signals()
    try:
        def sigint_at_second_example(event: RunEvent) -> None:
            if isinstance(event, Progress) and event.examples == 2:
                os.kill(os.getpid(), signal.SIGINT)

        class Kill:
            handle = staticmethod(sigint_at_second_example)

        def once(name: str, handlers: list[object]) -> int:
            report = tmp_path / name
            done = explore(ExploreConfig(target=reference_target(store=None, flaw=None),
                                         max_examples=5, seed=1, report_dir=report,
                                         toxiproxy=toxiproxy_server),
                           [ReportDirectory(report), *handlers])  # type: ignore[list-item]
            return done.result.exit_code

        assert once("stopped", [Kill()]) == 130
        assert once("next", []) == 0
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_signal_that_hypothesis_turned_into_another_error_still_stops_it_honestly(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT landed while Hypothesis read the test's source for its database key; Hypothesis
    then failed on its half-made state with an AssertionError, and the command printed a
    traceback and exited 1 (test_the_command_stopped_by_a_signal..., now and then)."""
    def hypothesis_caught_in_its_bookkeeping(*args: object, **kwargs: object) -> None:
        try:
            signal.raise_signal(signal.SIGINT)  # its handler runs before the next line
        except Interrupted:
            raise AssertionError from None  # what Hypothesis raised instead
        raise AssertionError("the SIGINT handler did not run")

    monkeypatch.setattr(explorer_module, "run_state_machine_as_test",
                        hypothesis_caught_in_its_bookkeeping)
    previous = signal.getsignal(signal.SIGINT)
    interrupt_on_signals()
    try:
        report = tmp_path / "report"
        done = explore(ExploreConfig(target=reference_target(store=None, flaw=None),
                                     max_examples=5, seed=1, report_dir=report,
                                     toxiproxy=toxiproxy_server), [ReportDirectory(report)])
    finally:
        signal.signal(signal.SIGINT, previous)
    assert done.result.exit_code == 130
    assert json.loads((report / "results.json").read_text())["stopped_by"] == "SIGINT"


def _charges(store: Path) -> int:
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=1) as connection:
            return int(connection.execute("select count(*) from charges").fetchone()[0])
    except sqlite3.Error:  # not created yet
        return 0


def _wait_until_charged(store: Path, timeout: float = 60.0) -> None:
    """Return once the reference server's ledger holds a charge: the exploration is sending."""
    deadline = time.monotonic() + timeout
    while _charges(store) == 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"nothing was charged in {store} within {timeout:g} s")
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_the_command_stopped_by_a_signal_exits_as_the_shell_expects_without_a_traceback(
        signum: int, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    report = tmp_path / "report"
    env = {**os.environ, "TOXIPROXY_URL": toxiproxy_server.url}
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "explore", "--reference", "--seed", "3",
         "--max-examples", "200", "--report-dir", str(report), "--quiet", "--jobs", "2"],
        cwd=REPOSITORY, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:  # two searches at once, each on a server of its own: both are stopped
        _wait_until_charged(report / "search-2" / "target" / "reference.sqlite3")
        process.send_signal(signum)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:  # it hung: take its target and Toxiproxy down with it
            for child in psutil.Process(process.pid).children(recursive=True):
                child.kill()
            process.kill()
    assert process.returncode == 128 + signum, err
    assert "Traceback" not in err + out
    assert "marked incomplete" in err
    results = json.loads((report / "results.json").read_text())
    assert results["complete"] is False and (report / "index.html").exists()


def test_failing_examples_are_kept_beside_the_reports_announced_and_forgotten_on_request(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """Seeded, so that each run finds its failure in a few examples (the examples are kept per
    seed as per target; an unseeded run could draw a story a moved clock broke first, and wait
    out a real-time telling), and without the opening, whose stories Hypothesis does not keep:
    it would find the flaw first."""
    env = {k: v for k, v in os.environ.items() if k != "CI"}  # CI keeps no examples
    env["TOXIPROXY_URL"] = toxiproxy_server.url

    runs = iter(range(3))
    ANNOUNCED = "failing example(s) saved by an earlier"

    def explore_once(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "harness.cli", "explore", "--reference", "--flaw",
             QUICK_FLAW, "--seed", "1", "--max-examples", "30", "--shrink-time", "3s", "--quiet",
             "--no-opening", "--jobs", "1", "--first-only",
             "--report-dir", str(tmp_path / "reports" / f"run-{next(runs)}"), *extra],
            cwd=REPOSITORY, env=env, capture_output=True, text=True, timeout=300)

    first = explore_once()
    assert first.returncode == 1 and ANNOUNCED not in first.stdout
    kept = tmp_path / "reports" / ".explore-examples"
    assert any(p.is_file() for p in kept.rglob("*")), "the failure is kept beside the reports"
    second = explore_once()
    assert second.returncode == 1 and ANNOUNCED in second.stdout
    assert str(kept) in second.stdout
    third = explore_once("--fresh")
    assert ANNOUNCED not in third.stdout

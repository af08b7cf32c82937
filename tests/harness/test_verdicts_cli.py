"""What a CI gate reads: the run's verdict and exit code, and a ``check`` that judges a saved
run without changing it (issue 14, items 1, 2, 3 and 5)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness import load_target
from harness._outcomes import RunResult, ScenarioOutcome
from harness.judging._checker import CheckResult, PropertyResult
from harness.reports import render_html, render_junit
from harness.reports._results import render_results
from tests.harness.test_run_cli import env, harness, results

__all__ = ["env"]  # the fixture, shared with test_run_cli


def _digests(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def flawed_run(tmp_path_factory: pytest.TempPathFactory,
               toxiproxy_server: object) -> Path:
    import os

    report = tmp_path_factory.mktemp("flawed")
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--reference", "--flaw", "no-body-hash",
         "--scenario", "key-reuse", "--report-dir", str(report), "--seed", "3"],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "TOXIPROXY_URL": toxiproxy_server.url},  # type: ignore[attr-defined]
    )
    assert done.returncode == 1, done.stderr
    return report


def test_check_judges_and_prints_but_never_rewrites_the_run(env: dict[str, str],
                                                          flawed_run: Path) -> None:
    before = _digests(flawed_run)
    done = harness(env, "check", str(flawed_run))
    assert done.returncode == 1, done.stderr
    assert "P4" in done.stderr and "FAIL" in done.stderr
    assert _digests(flawed_run) == before


def test_check_refuses_to_write_over_the_run_it_judges(env: dict[str, str],
                                                      flawed_run: Path) -> None:
    done = harness(env, "check", str(flawed_run), "--write-to", str(flawed_run))
    assert done.returncode == 2 and "never rewrites" in done.stderr


@pytest.mark.parametrize("damage", ["emptied", "cut in half"])
def test_a_missing_or_truncated_history_is_an_error_not_a_pass(
        env: dict[str, str], flawed_run: Path, tmp_path: Path, damage: str) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("results.json", "history.jsonl"):
        (copy / name).write_bytes((flawed_run / name).read_bytes())
    lines = (copy / "history.jsonl").read_text().splitlines(keepends=True)
    kept = [] if damage == "emptied" else lines[: len(lines) // 2]
    (copy / "history.jsonl").write_text("".join(kept))
    done = harness(env, "check", str(copy))
    assert done.returncode == 2, done.stderr
    assert "truncated" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("command", [
    ["run", "--reference"],
    ["load", "--reference", "--duration", "1s"],
    ["demo", "check-then-insert"],
    ["matrix"],
    ["explore", "--reference"],
])
def test_a_report_dir_that_is_a_file_is_a_usage_error(env: dict[str, str], tmp_path: Path,
                                                      command: list[str]) -> None:
    a_file = tmp_path / "not-a-directory"
    a_file.write_text("x")
    done = harness(env, *command, "--report-dir", str(a_file / "inside"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert f"{a_file} is a file, not a directory" in done.stderr
    assert "Traceback" not in done.stderr


# ---- verdicts without a process: what every report says ---------------------------------


def _outcome(name: str, verdict: str, reason: str | None = None) -> ScenarioOutcome:
    check = CheckResult({"P1": PropertyResult("P1", verdict, reason=reason)})  # type: ignore[arg-type]
    return ScenarioOutcome(name, verdict, ("P1",), check)  # type: ignore[arg-type]


def _result(*outcomes: ScenarioOutcome, complete: bool = True,
            planned: tuple[str, ...] = (), stopped_by: str | None = None) -> RunResult:
    return RunResult(load_target("reference"), outcomes, 1, "2026-12-01T00:00:00+00:00", None,
                     86400.0, 1.0, complete, planned=planned, stopped_by=stopped_by)


def test_a_run_whose_scenarios_are_all_unknown_is_inconclusive_not_fail() -> None:
    result = _result(_outcome("timeout-after-commit", "unknown", "the oracle failed"))
    assert (result.verdict, result.exit_code) == ("inconclusive", 3)
    assert "INCONCLUSIVE" in render_html(result)


def test_an_interrupted_run_is_never_a_pass() -> None:
    result = _result(_outcome("timeout-after-commit", "pass"), complete=False,
                     planned=("timeout-after-commit", "key-reuse", "late-retry"),
                     stopped_by="SIGINT")
    assert (result.verdict, result.exit_code) == ("incomplete", 130)
    assert result.unfinished == ("key-reuse", "late-retry")
    saved = json.loads(render_results(result))
    assert saved["verdict"] == "incomplete" and saved["unfinished"] == ["key-reuse",
                                                                       "late-retry"]
    suite = ET.fromstring(render_junit(result)).find("testsuite")
    assert suite is not None and suite.get("errors") == "2" and suite.get("tests") == "3"
    page = render_html(result)
    assert page.index("INCOMPLETE") < page.index("timeout-after-commit")
    assert "PASS" not in page.split("<main", 1)[1].split("</section>", 1)[0]


def test_sigterm_exits_as_the_shell_reports_it() -> None:
    result = _result(complete=False, planned=("key-reuse",), stopped_by="SIGTERM")
    assert result.exit_code == 143


def test_check_on_an_interrupted_run_says_incomplete(env: dict[str, str], flawed_run: Path,
                                                     tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    saved = results(flawed_run)
    saved.update(complete=False, planned=["key-reuse", "late-retry"], stopped_by="SIGINT")
    (copy / "results.json").write_text(json.dumps(saved))
    (copy / "history.jsonl").write_bytes((flawed_run / "history.jsonl").read_bytes())
    done = harness(env, "check", str(copy))
    assert done.returncode == 130, done.stderr
    assert "INCOMPLETE" in done.stderr and "late-retry" in done.stderr


def test_the_reference_server_is_named_with_its_flaw_and_store() -> None:
    from harness.targets._reference import reference_target

    assert reference_target(store=None, flaw="split-commit").name == (
        "reference-server (flaw split-commit, SQLite)")
    assert reference_target(store="postgresql://u@127.0.0.1:5/db", flaw=None).name == (
        "reference-server (correct, PostgreSQL)")


@pytest.mark.parametrize(("flag", "message"), [
    (["--flaw", "nope"], "--flaw: unknown flaw 'nope'; choose one of: server-generated-key"),
    (["--store", "mysql://x"], "--store:"),
])
def test_a_bad_flaw_or_store_is_refused_before_anything_starts(tmp_path: Path, flag: list[str],
                                                               message: str) -> None:
    import os

    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--reference", *flag, "--report-dir",
         str(tmp_path / "r")], capture_output=True, text=True, timeout=60,
        env={**os.environ, "TOXIPROXY_URL": "http://127.0.0.1:9"},  # never reached
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("signame", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_an_interrupted_run_says_incomplete_everywhere(env: dict[str, str], tmp_path: Path,
                                                       signame: str, code: int) -> None:
    import os
    import signal

    process = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--reference", "--scenario", "key-reuse",
         "--scenario", "in-flight-retry", "--scenario", "late-retry",
         "--report-dir", str(tmp_path)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    assert process.stderr is not None
    seen = []
    try:
        for _, line in zip(range(400), process.stderr, strict=False):
            seen.append(line)
            if "key-reuse" in line and "[1/3]" in line:
                break
        else:
            pytest.fail("the run never reported its first scenario:\n" + "".join(seen))
        os.killpg(process.pid, getattr(signal, signame))  # Ctrl-C reaches the whole group
        rest = process.stderr.read()
        assert process.wait(timeout=60) == code, rest
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert "Traceback" not in rest and "INCOMPLETE" in rest
    data = results(tmp_path)
    assert data["verdict"] == "incomplete" and data["stopped_by"] == signame
    assert "in-flight-retry" in data["unfinished"]  # seconds long, stopped as key-reuse ended
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("errors", 0)) >= 1
    assert "INCOMPLETE" in (tmp_path / "index.html").read_text()


def _target_file(tmp_path: Path, where: str) -> Path:
    path = tmp_path / "target.toml"
    path.write_text(f'name = "absent"\n{where}\n[effects]\nkind = "http"\nurl = "/effects"\n'
                    'query = { key = "{key}" }\n')
    return path


@pytest.mark.parametrize(("where", "expected"), [
    ('url = "http://127.0.0.1:9"',
     "the service at http://127.0.0.1:9 is unavailable: it does not answer (connection refused)"),
    ('[start]\ncommand = ["sh", "-c", "echo no database; exit 7", "{port}"]',
     "the command exited with code 7 before it was ready; its last output lines:\nno database"),
    ('url = "http://10.1.2.3:8000"', "refusing to send traffic to http://10.1.2.3:8000"),
])
def test_a_target_that_is_not_there_stops_the_run_at_once(env: dict[str, str], tmp_path: Path,
                                                          where: str, expected: str) -> None:
    done = harness(env, "run", "--target", str(_target_file(tmp_path, where)),
                   "--report-dir", str(tmp_path / "r"), timeout=60)
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr and "Traceback" not in done.stderr
    assert "<" not in done.stderr.split("fix:")[0], "no executor repr in the message"
    # Refused before the first scenario (no banner: it prints once the target is up), not
    # after every scenario spent its retries on a target that is not there.
    assert "idem-harness target" not in done.stdout + done.stderr, "no banner before a refusal"
    assert not (tmp_path / "r").exists(), "a refused run leaves no report directory behind"


def test_store_outage_on_the_reference_server_names_the_flag_that_enables_it() -> None:
    from harness.targets._reference import reference_target
    from scenarios import get_scenario

    reason = get_scenario("store-outage").not_applicable(reference_target(store=None, flaw=None))
    assert reason is not None and "add --postgres" in reason and "[store_proxy]" not in reason
    assert get_scenario("store-outage").not_applicable(
        reference_target(store="postgresql://u@127.0.0.1:5432/db", flaw=None)) is None

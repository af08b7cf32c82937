"""``idem-harness run`` end to end: the real CLI, the real reference server, the real Toxiproxy."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from harness.services._postgres import PostgresServer
from harness.services._toxiproxy import ToxiproxyServer

HARNESS = [sys.executable, "-m", "harness.cli"]


@pytest.fixture
def env(toxiproxy_server: ToxiproxyServer) -> dict[str, str]:
    """The CLI reuses the session's Toxiproxy, so CI's service rules apply to it too."""
    return {**os.environ, "TOXIPROXY_URL": toxiproxy_server.url}


def harness(env: dict[str, str], *args: str,
            timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HARNESS, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def results(report: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((report / "results.json").read_text())


def test_the_correct_reference_server_passes_every_scenario(env: dict[str, str],
                                                             tmp_path: Path) -> None:
    done = harness(env, "run", "--reference", "--report-dir", str(tmp_path), "--seed", "7")
    assert done.returncode == 0, done.stderr
    data = results(tmp_path)
    assert data["verdict"] == "pass" and data["complete"] and data["seed"] == 7
    assert data["counts"]["findings"] == 0
    names = {s["name"] for s in data["scenarios"]}
    ran = {s["name"] for s in data["scenarios"] if s["verdict"] != "n/a"}
    assert {"timeout-after-commit", "key-reuse", "crash-mid-request"} <= ran
    # SQLite: no network between server and store
    assert names - ran == {"store-outage", "cut-after-commit"}
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("tests", 0)) == len(names)
    assert int(suite.get("failures", 1)) == 0 and int(suite.get("skipped", 0)) == 2
    lines = (tmp_path / "history.jsonl").read_text().splitlines()
    assert {json.loads(line)["scenario"] for line in lines} == ran
    assert "PASS" in done.stderr


@pytest.mark.parametrize(("flaw", "scenario", "expected"), [
    ("server-generated-key", "timeout-after-commit", "P1"),
    ("no-body-hash", "key-reuse", "P4"),
])
def test_a_flawed_server_exits_1_with_the_expected_finding(
    env: dict[str, str], tmp_path: Path, flaw: str, scenario: str, expected: str
) -> None:
    done = harness(env, "run", "--reference", "--flaw", flaw, "--scenario", scenario,
                   "--report-dir", str(tmp_path))
    assert done.returncode == 1, done.stderr
    data = results(tmp_path)
    assert data["verdict"] == "fail"
    findings = data["scenarios"][0]["findings"]
    assert expected in {f["property"] for f in findings}
    for finding in findings:
        assert finding["class"] in ("safety", "conformance") and finding["key"]
        assert finding["message"] and finding["reproduce"].startswith("bash ")
    failure = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite/testcase/failure")
    assert failure is not None and expected in (failure.get("message") or "")


def test_a_target_file_that_starts_the_server_by_command_works_the_same(
    env: dict[str, str], tmp_path: Path
) -> None:
    reference = (Path(__file__).parents[2] / "harness" / "targets" / "reference.toml").read_text()
    own = reference.replace('name = "reference-server"', 'name = "my-copy"').replace(
        'syntax = "sf-string"', 'syntax = "token"')
    target = tmp_path / "mine.toml"
    target.write_text(own)
    done = harness(env, "run", "--target", str(target), "--scenario", "timeout-after-commit",
                   "--scenario", "key-reuse", "--report-dir", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    assert results(tmp_path / "report")["target"]["name"] == "my-copy"


def test_a_bad_target_file_exits_2_naming_the_field_and_the_fix(
    env: dict[str, str], tmp_path: Path
) -> None:
    target = tmp_path / "bad.toml"
    target.write_text('name = "x"\nurl = "http://127.0.0.1:1"\n[effects]\nkind = "http"\n'
                      'url = "/e"\n[promises]\nmode = "sloppy"\n')
    done = harness(env, "run", "--target", str(target), "--report-dir", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "promises.mode" in done.stderr and "fix:" in done.stderr
    assert not (tmp_path / "r" / "results.json").exists()


def test_a_remote_target_is_refused_without_the_flag(env: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "remote.toml"
    target.write_text('name = "x"\nurl = "http://192.0.2.10:80"\n[effects]\nkind = "http"\n'
                      'url = "/e"\nquery = { key = "{key}" }\n')
    done = harness(env, "run", "--target", str(target), "--report-dir", str(tmp_path / "r"))
    assert done.returncode == 2
    assert "not a loopback address" in done.stderr and "--allow-remote" in done.stderr


def test_flags_that_do_not_fit_together_exit_2(env: dict[str, str], tmp_path: Path) -> None:
    done = harness(env, "run", "--reference", "--scenario", "no-such-scenario")
    assert done.returncode == 2 and "known scenarios" in done.stderr
    done = harness(env, "run", "--flaw", "no-body-hash", "--target", "x.toml")
    assert done.returncode == 2 and "only apply to --reference" in done.stderr
    done = harness(env, "run", "--reference", "--postgres", "--store", "sqlite:///x.db")
    assert done.returncode == 2 and "without --store" in done.stderr


def test_on_postgresql_the_store_outage_scenario_applies_and_holds(
        env: dict[str, str], postgres_server: PostgresServer, tmp_path: Path) -> None:
    done = harness({**env, "IDEM_PG_DSN": postgres_server.dsn}, "run", "--reference",
                   "--postgres", "--scenario", "store-outage", "--scenario", "missing-key",
                   "--report-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert {s["name"]: s["verdict"] for s in results(tmp_path)["scenarios"]} == {
        "store-outage": "pass", "missing-key": "pass"}


def test_check_judges_a_saved_run_again(env: dict[str, str], tmp_path: Path) -> None:
    done = harness(env, "run", "--reference", "--flaw", "no-body-hash", "--scenario",
                   "key-reuse", "--report-dir", str(tmp_path))
    assert done.returncode == 1
    before = results(tmp_path)["scenarios"][0]["findings"]
    (tmp_path / "results.json").write_text(
        (tmp_path / "results.json").read_text().replace('"fail"', '"pass"'))
    again = harness(env, "check", str(tmp_path), "--write-to", str(tmp_path / "again"))
    assert again.returncode == 1
    after = results(tmp_path / "again")
    assert after["verdict"] == "fail"
    assert [f["message"] for f in after["scenarios"][0]["findings"]] == [
        f["message"] for f in before]
    scripts = [f["reproduce"].split()[-1] for f in after["scenarios"][0]["findings"]]
    assert all(Path(script).parent == tmp_path / "again" / "reproduce" and Path(script).is_file()
               for script in scripts), "check --write-to writes the scripts beside its report"


def test_a_run_killed_half_way_leaves_what_it_finished(env: dict[str, str],
                                                      tmp_path: Path) -> None:
    process = subprocess.Popen(
        [*HARNESS, "run", "--reference", "--scenario", "key-reuse", "--scenario",
         "in-flight-retry", "--report-dir", str(tmp_path)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    assert process.stderr is not None
    try:
        # The console prints a scenario's line after the report files for it are written.
        for _, line in zip(range(200), process.stderr, strict=False):
            if "key-reuse" in line and "[1/2]" in line:
                break
        else:
            pytest.fail("the run never reported its first scenario")
    finally:
        # SIGKILL leaves the harness no chance to clean up: collect its children first.
        children = psutil.Process(process.pid).children(recursive=True)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
    data = results(tmp_path)
    assert data["complete"] is False
    assert [s["name"] for s in data["scenarios"]] == ["key-reuse"]
    assert (tmp_path / "junit.xml").exists() and (tmp_path / "history.jsonl").exists()


def test_a_crash_by_signal_is_survived_by_the_correct_server(env: dict[str, str],
                                                            tmp_path: Path) -> None:
    """A target without a crash header: the harness SIGKILLs it while a request is handled."""
    reference = (Path(__file__).parents[2] / "harness" / "targets" / "reference.toml").read_text()
    start = reference.index("[hooks.crash]")
    end = reference.index("[client]")
    target = tmp_path / "signal.toml"
    target.write_text(reference[:start] + '[hooks.crash]\nsignal = "SIGKILL"\n\n'
                      + reference[end:])
    done = harness(env, "run", "--target", str(target), "--scenario", "crash-mid-request",
                   "--report-dir", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    history = [json.loads(line)
               for line in (tmp_path / "report" / "history.jsonl").read_text().splitlines()]
    crashes = [e for e in history if e["f"] == "crash"]
    assert [c["value"]["how"] for c in crashes] == ["SIGKILL"]
    assert any(e["f"] == "restart" for e in history)

"""A saved run is read again as it was judged: ``check`` and ``replay`` load the target the run
saved, whatever its shape, and say what changed since."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness._outcomes import RunResult
from harness.reports import load_run, render_history, render_results
from harness.targets._loader import load_target, saved_target
from tests.harness.test_run_cli import env, harness, results

__all__ = ["env"]

CORPUS = Path(__file__).parents[1] / "corpus" / "targets"


def test_a_target_with_operations_is_saved_as_a_file_says_it_and_loads_again(
        tmp_path: Path) -> None:
    target = load_target(CORPUS / "two_routes.toml")
    result = RunResult(target, (), 1, "2026-01-01T00:00:00+00:00", tmp_path, 86400.0, 1.0, True)
    (tmp_path / "results.json").write_text(render_results(result))
    (tmp_path / "history.jsonl").write_text(render_history(result))
    definition = results(tmp_path)["target"]["definition"]
    assert "endpoint" not in definition and len(definition["operations"]) == 2
    _, loaded, _ = load_run(tmp_path)
    assert loaded.keyed_operations == target.keyed_operations
    assert loaded.endpoint == target.operations[0]


def test_a_run_saved_with_both_endpoint_and_operations_still_loads() -> None:
    """What runs wrote before: the endpoint there is only the first operation."""
    target = load_target(CORPUS / "two_routes.toml")
    older = {**target.model_dump(mode="json"), "endpoint": target.operations[0].model_dump()}
    assert saved_target(older).keyed_operations == target.keyed_operations


def test_check_judges_a_run_of_a_target_with_operations(env: dict[str, str],
                                                        tmp_path: Path) -> None:
    report = tmp_path / "run"
    done = harness(env, "run", "--target", str(CORPUS / "two_routes.toml"), "--scenario",
                   "key-reuse", "--seed", "3", "--report-dir", str(report), "--quiet")
    assert done.returncode in (0, 1, 3), done.stderr
    again = harness(env, "check", str(report))
    assert again.returncode == done.returncode, again.stderr
    assert "not both" not in again.stderr


def test_replay_reads_a_story_saved_with_both_endpoint_and_operations(env: dict[str, str],
                                                                      tmp_path: Path) -> None:
    found = harness(env, "explore", "--reference", "--flaw", "no-body-hash", "--max-examples",
                    "20", "--seed", "1", "--shrink-time", "3s", "--jobs", "1", "--first-only",
                    "--report-dir",
                    str(tmp_path / "explore"), "--quiet")
    assert found.returncode == 1, found.stderr
    path = tmp_path / "explore" / "story.json"
    story = json.loads(path.read_text())
    definition = story["target_definition"]
    story["target_definition"] = {**definition, "operations": [definition["endpoint"]]}
    path.write_text(json.dumps(story))
    again = harness(env, "replay", str(path), "--report-dir", str(tmp_path / "replay"))
    assert "Traceback" not in again.stderr, again.stderr
    # Read and played against its own target (whether a story that races breaks again on
    # this telling is not what is tested here).
    assert again.returncode in (0, 1) and "P4: " in again.stdout, again.stdout
    assert "against reference-server (flaw no-body-hash" in again.stdout


def _flawed_run(env: dict[str, str], report: Path) -> None:
    done = harness(env, "run", "--reference", "--flaw", "no-body-hash", "--scenario",
                   "key-reuse", "--seed", "3", "--report-dir", str(report), "--quiet")
    assert done.returncode == 1, done.stderr


def test_check_says_where_the_verdict_differs_from_the_saved_one(env: dict[str, str],
                                                                tmp_path: Path) -> None:
    report = tmp_path / "run"
    _flawed_run(env, report)
    same = harness(env, "check", str(report))
    assert same.returncode == 1 and "the same verdict as the run saved: fail" in same.stderr
    saved = results(report)
    saved["verdict"] = "pass"  # as an older harness might have judged it
    for scenario in saved["scenarios"]:
        scenario["verdict"] = "pass"
        scenario["property_verdicts"]["P4"] = "pass"
    (report / "results.json").write_text(json.dumps(saved))
    again = harness(env, "check", str(report), "--write-to", str(tmp_path / "again"))
    assert again.returncode == 1, again.stderr
    assert "the verdict changed: the run saved PASS, judged again it is FAIL" in again.stderr
    assert "key-reuse: pass -> fail (P4: pass -> fail)" in again.stderr
    rejudged = results(tmp_path / "again")["extra"]["check"]
    assert rejudged["saved_verdict"] == "pass"
    assert rejudged["changes"] == ["key-reuse: pass -> fail (P4: pass -> fail)"]


def test_check_write_to_writes_scripts_that_replay_after_the_run(env: dict[str, str],
                                                                 tmp_path: Path) -> None:
    report = tmp_path / "run"
    _flawed_run(env, report)
    done = harness(env, "check", str(report), "--write-to", str(tmp_path / "again"))
    assert done.returncode == 1, done.stderr
    assert "curl" not in done.stderr  # no curl line to a port that is gone
    lines = {f["reproduce"] for s in results(tmp_path / "again")["scenarios"]
             for f in s["findings"]}
    assert lines and all(line.startswith("bash ") for line in lines)
    for line in lines:
        replay = subprocess.run(line.split(), capture_output=True, text=True, env=env,
                                timeout=240)
        assert replay.returncode == 1, replay.stdout + replay.stderr
        assert "reproduced: P4 broke again in key-reuse" in replay.stdout

"""A saved run is read again as it was judged: ``check`` and ``replay`` load the target the run
saved, whatever its shape, and say what changed since."""

from __future__ import annotations

import json
from pathlib import Path

from harness._outcomes import RunResult
from harness._target import load_target, saved_target
from harness.reports import load_run, render_history, render_results
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
                    "20", "--seed", "1", "--shrink-time", "3s", "--report-dir",
                    str(tmp_path / "explore"), "--quiet")
    assert found.returncode == 1, found.stderr
    path = tmp_path / "explore" / "story.json"
    story = json.loads(path.read_text())
    definition = story["target_definition"]
    story["target_definition"] = {**definition, "operations": [definition["endpoint"]]}
    path.write_text(json.dumps(story))
    again = harness(env, "replay", str(path), "--report-dir", str(tmp_path / "replay"))
    assert "Traceback" not in again.stderr, again.stderr
    assert again.returncode == 1 and "P4: reproduced" in again.stdout, again.stdout

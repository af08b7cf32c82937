"""``pytest --idem-target``: one test per scenario and one for the explorer, findings with their
shortest story, markers that select scenarios, profiles that decide what a missing service
means, and nothing at all without the options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness import load_target
from scenarios import default_scenarios
from tests.plugin.conftest import flawed_reference

#: The tests a target gets: one per scenario, and the explorer's.
TESTS = len(default_scenarios(load_target("reference"))) + 1


def test_without_its_options_the_plugin_adds_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_own():\n    assert True\n")
    result = pytester.runpytest("-q")
    result.assert_outcomes(passed=1)
    markers = pytester.runpytest("--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.idem_scenario*"])
    markers.stdout.no_fnmatch_line("@pytest.mark.idem_key_reuse*")


def test_loading_the_plugin_does_not_load_the_engine() -> None:
    """Every pytest run on a machine with idem-harness installed loads the plugin."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, harness.pytest_plugin; "
         "print(sorted(m for m in sys.modules if m.startswith(('harness.', 'scenarios', 'httpx', "
         "'pydantic', 'psycopg'))))"],
        capture_output=True, text=True, check=True, timeout=60)
    assert loaded.stdout.strip() == "['harness.pytest_plugin']"


def test_a_gated_session_lists_a_marker_per_scenario(pytester: pytest.Pytester) -> None:
    markers = pytester.runpytest("--idem-reference", "--markers")
    markers.stdout.fnmatch_lines(["@pytest.mark.idem_key_reuse: *"])


def test_markers_select_scenarios_and_a_correct_target_passes(gate: pytest.Pytester) -> None:
    result = gate.runpytest_subprocess(
        "--idem-reference", "--idem-report-dir=out", "--idem-seed=3", "-v",
        "-m", "idem_scenario(name='missing-key') or idem_tenant_collision",
    )
    result.assert_outcomes(passed=2, deselected=TESTS - 2)
    result.stdout.fnmatch_lines(["*idem-harness?reference-server?::missing-key PASSED*",
                                 "*idem-harness?reference-server?::tenant-collision PASSED*"])
    saved = json.loads((gate.path / "out" / "reference-server" / "results.json").read_text())
    assert [s["name"] for s in saved["scenarios"]] == ["missing-key", "tenant-collision"]
    assert saved["seed"] == 3 and saved["complete"]


def test_a_finding_fails_with_its_story_and_a_missing_hook_skips(gate: pytest.Pytester) -> None:
    target = flawed_reference(gate.path, "no-body-hash")
    result = gate.runpytest_subprocess(f"--idem-target={target}", "-k", "key-reuse or late-retry",
                                       "-rs")
    result.assert_outcomes(failed=1, skipped=1, deselected=TESTS - 2)
    result.stdout.fnmatch_lines([
        "*idem-harness: scenario key-reuse against reference-no-body-hash: fail*",
        "P4 conformance *",
        "  shortest story:",
        '    state = IdempotencyMachine(target="reference-no-body-hash")',
        "    state.send(key=k1, body=b1) * -> 201 *",
        "*state.teardown()",
        "  reproduce: bash *reproduce/key-reuse-*.sh",
        "SKIPPED*reference-no-body-hash.toml: late-retry: *lacks a clock the harness can move*",
    ])


@pytest.mark.parametrize(("profile", "outcome"), [("dev", "skipped"), ("ci", "failed")])
def test_a_missing_service_skips_in_dev_and_fails_in_ci(
    gate: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, profile: str, outcome: str
) -> None:
    monkeypatch.setenv("TOXIPROXY_URL", "http://127.0.0.1:9")  # the discard port: nobody answers
    result = gate.runpytest("--idem-reference", f"--idem-profile={profile}", "-rs",
                            "-m", "idem_missing_key")
    result.assert_outcomes(**{outcome: 1}, deselected=TESTS - 1)
    result.stdout.fnmatch_lines(["*Toxiproxy is unavailable*"])
    result.stdout.no_fnmatch_line("*_gate*")  # a skip is the target's, not the plugin's line


def test_a_printed_test_id_can_be_passed_back(gate: pytest.Pytester, tmp_path: Path) -> None:
    listed = gate.runpytest("--idem-reference", "--collect-only", "-q")
    chosen = next(line for line in listed.stdout.lines if line.endswith("::missing-key"))
    result = gate.runpytest_subprocess("--idem-reference", chosen, "-v",
                                       f"--idem-report-dir={tmp_path / 'out'}")
    result.assert_outcomes(passed=1, deselected=TESTS - 1)
    result.stdout.fnmatch_lines([f"rootdir: {gate.path}"])  # the report dir elsewhere moves nothing
    wrong = gate.runpytest("--idem-reference", chosen.replace("missing-key", "nope"))
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR


def test_a_bad_target_file_or_profile_is_a_usage_error(gate: pytest.Pytester) -> None:
    result = gate.runpytest("--idem-target=missing.toml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*missing.toml: 1 problem(s) in the target file",
                                 "*the file does not exist"])
    result = gate.runpytest("--idem-reference", "--idem-profile=fast")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown profile 'fast'*"])


def test_the_explorer_is_one_more_test_with_a_budget(gate: pytest.Pytester) -> None:
    listed = gate.runpytest("--idem-reference", "--idem-explore-examples=0", "--collect-only")
    listed.stdout.fnmatch_lines([f"*{TESTS - 1} tests collected*"])
    result = gate.runpytest_subprocess("--idem-reference", "--idem-explore-examples=2",
                                       "--idem-seed=1", "--idem-report-dir=out",
                                       "-m", "idem_explore")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1, result.stdout.str()
    assert outcomes["deselected"] == TESTS - 1
    saved = json.loads((gate.path / "out" / "reference-server" / "explore" / "results.json")
                       .read_text())
    assert saved["extra"]["explore"]["max_examples"] == 2
    assert [s["name"] for s in saved["scenarios"]] == ["explore"]


def test_a_gate_that_ran_nothing_but_skips_fails(gate: pytest.Pytester) -> None:
    """pytest passes a session whose tests all skipped; the gate does not (nothing run is
    never a pass): late-retry does not apply to a target without a clock hook."""
    target = flawed_reference(gate.path, "no-body-hash")
    result = gate.runpytest_subprocess(f"--idem-target={target}", "-k", "late-retry", "-rs")
    result.assert_outcomes(skipped=1, deselected=TESTS - 1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["idem-harness: target reference-no-body-hash exercised "
                                 "nothing: each of its 1 selected test(s) does not apply*"])
    listed = gate.runpytest(f"--idem-target={target}", "-k", "late-retry", "--collect-only")
    assert listed.ret == pytest.ExitCode.OK  # listing the tests runs none

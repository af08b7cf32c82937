"""Each third-party example target, run end to end by ``idem-harness matrix --targets``: the
harness must produce a complete, well-formed result for every scenario of the catalog, whatever
the verdict, so a change to the harness that breaks real targets is caught here.  The verdicts
themselves are the libraries' business (docs/conformance.md records them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness import PROPERTIES, load_target
from harness.services._toxiproxy import ToxiproxyServer
from scenarios import CATALOG, default_scenarios
from tests.thirdparty.conftest import INSTALLERS, install

TARGETS = sorted(INSTALLERS)


@pytest.fixture(scope="module")
def matrix_dir(examples_installed: list[Path], toxiproxy_server: ToxiproxyServer,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``idem-harness matrix`` over the reference server and every example target."""
    report = tmp_path_factory.mktemp("matrix")
    env = {**os.environ, "TOXIPROXY_URL": toxiproxy_server.url}
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "matrix", "--no-flaws", "--seed", "11", "--jobs", "3",
         "--report-dir", str(report), "--targets", *map(str, examples_installed)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    # Exit 1 means a reference-server row is not as it should be: tests/test_flaw_matrix.py's
    # concern.  Exit 2 means the harness could not run at all.
    assert done.returncode in (0, 1), done.stderr
    return report


#: The matrix's columns for HTTP targets: the HTTP scenarios (the consumer ones are a queue's).
HTTP_SCENARIOS = [s.name for s in default_scenarios(load_target("reference"))]


def row_of(matrix_dir: Path, label: str) -> dict[str, Any]:
    matrix = json.loads((matrix_dir / "matrix.json").read_text())
    assert matrix["scenarios"] == HTTP_SCENARIOS
    rows = [r for r in matrix["rows"] if r["label"] == label]
    assert len(rows) == 1, f"no single row {label!r} in matrix.json"
    row: dict[str, Any] = rows[0]
    return row


@pytest.mark.parametrize("label", TARGETS)
def test_the_matrix_has_a_well_formed_cell_for_every_scenario(matrix_dir: Path,
                                                              label: str) -> None:
    row = row_of(matrix_dir, label)
    target = load_target(Path(__file__).parents[2] / "examples" / "targets" / f"{label}.toml")
    assert row["kind"] == "target" and row["target"] == label
    assert list(row["cells"]) == HTTP_SCENARIOS
    for name, cell in row["cells"].items():
        expected_reason = CATALOG[name].not_applicable(target)
        if expected_reason:
            assert cell == {"verdict": "n/a", "properties": [], "reason": expected_reason,
                            "text": "not applicable"}
            continue
        if cell["verdict"] == "n/a":  # found while it ran (cut-after-commit: no write seen)
            assert cell["reason"] and cell["text"] == "not applicable", f"{name}: {cell}"
            continue
        assert cell["verdict"] in ("pass", "fail"), f"{name}: {cell}"
        if cell["verdict"] == "fail":
            assert cell["properties"] and set(cell["properties"]) <= set(PROPERTIES.ids())
            assert cell["text"] == f"finding ({', '.join(cell['properties'])})"
        else:
            assert cell["properties"] == [] and cell["text"] == "held"


@pytest.mark.parametrize("label", TARGETS)
def test_each_run_saved_a_complete_judged_history(matrix_dir: Path, label: str) -> None:
    run_dir = matrix_dir / label
    results = json.loads((run_dir / "results.json").read_text())
    assert results["complete"] and results["target"]["name"] == label
    assert [s["name"] for s in results["scenarios"]] == HTTP_SCENARIOS
    cells = row_of(matrix_dir, label)["cells"]
    histories: dict[str, list[dict[str, Any]]] = {}
    for line in (run_dir / "history.jsonl").read_text().splitlines():
        event = json.loads(line)
        histories.setdefault(event["scenario"], []).append(event)
    for scenario in results["scenarios"]:
        name = scenario["name"]
        assert scenario["verdict"] == cells[name]["verdict"]
        if scenario["verdict"] == "n/a":
            if CATALOG[name].not_applicable(load_target(
                    Path(__file__).parents[2] / "examples" / "targets" / f"{label}.toml")):
                assert name not in histories  # decided before it ran: nothing sent
            continue
        events = histories[name]
        assert scenario["requests"] > 0
        effects = [e for e in events if e["f"] == "effects"]
        assert effects and all(e["type"] == "ok" for e in effects), (
            f"{name}: the recorder could not count every key: {effects}")
        for finding in scenario["findings"]:
            assert finding["class"] in ("safety", "conformance") and finding["message"]
            assert finding["events"] and max(finding["events"]) < len(events)
    suite = ET.parse(run_dir / "junit.xml").getroot().find("testsuite")
    assert suite is not None and int(suite.get("tests", 0)) == len(HTTP_SCENARIOS)
    skipped = sum(1 for s in results["scenarios"] if s["verdict"] == "n/a")
    assert int(suite.get("skipped", -1)) == skipped


@pytest.mark.parametrize("label", TARGETS)
def test_nothing_the_example_started_is_left_running(matrix_dir: Path, label: str) -> None:
    redis_port = int((matrix_dir / label / "target" / "redis" / "port").read_text())
    listening = {getattr(c.laddr, "port", None) for c in psutil.net_connections("tcp")
                 if c.status == "LISTEN"}
    assert redis_port not in listening


@pytest.mark.parametrize("label", TARGETS)
def test_a_second_install_changes_nothing(examples_installed: list[Path], label: str) -> None:
    stamps = sorted(Path(INSTALLERS[label][0]).parent.glob("*/.installed"))
    assert len(stamps) == 1
    before = stamps[0].stat().st_mtime_ns
    done = install(label)
    assert done.returncode == 0 and "installing" not in done.stderr, done.stderr
    assert stamps[0].stat().st_mtime_ns == before

"""``idem-harness run`` on every correct corpus service finds nothing wrong (issue 13): a
finding here is a bug in the service or a check that assumes the reference server's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.services._toxiproxy import ToxiproxyServer
from scenarios import default_scenarios
from tests.corpus.conftest import corpus_target
from tests.corpus.correct import SERVICES, findings_of, listed, play_every_correct_service


@pytest.fixture(scope="module")
def correct_runs(tmp_path_factory: pytest.TempPathFactory,
                 toxiproxy_server: ToxiproxyServer) -> dict[str, Path]:
    return play_every_correct_service("run", tmp_path_factory, toxiproxy_server)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", SERVICES)
def test_a_correct_service_has_no_finding(name: str, correct_runs: dict[str, Path]) -> None:
    report = correct_runs[name]
    assert (report / "results.json").exists(), (report / "stderr.txt").read_text()
    results = json.loads((report / "results.json").read_text())
    assert results["complete"]
    assert [s["name"] for s in results["scenarios"]] == [
        s.name for s in default_scenarios(corpus_target(name))]
    judged = [s for s in results["scenarios"] if s["verdict"] != "n/a"]
    assert len(judged) >= 8 and all(s["requests"] > 0 for s in judged if not s.get("reason"))
    findings = findings_of(results)
    assert not findings, f"false findings on the correct service {name}:\n{listed(findings)}"

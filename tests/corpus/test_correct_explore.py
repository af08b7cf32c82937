"""A seeded ``idem-harness explore`` (its opening, then a few drawn examples) on every correct
corpus service finds nothing wrong and decides every property (issue 23): no finding, no story,
no "unknown"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.services._toxiproxy import ToxiproxyServer
from tests.corpus.correct import SERVICES, findings_of, listed, play_every_correct_service


@pytest.fixture(scope="module")
def correct_explorations(tmp_path_factory: pytest.TempPathFactory,
                         toxiproxy_server: ToxiproxyServer) -> dict[str, Path]:
    return play_every_correct_service("explore", tmp_path_factory, toxiproxy_server)


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", SERVICES)
def test_the_explorer_finds_nothing_wrong_with_a_correct_service(
        name: str, correct_explorations: dict[str, Path]) -> None:
    report = correct_explorations[name]
    assert (report / "results.json").exists(), (report / "stderr.txt").read_text()
    results = json.loads((report / "results.json").read_text())
    findings = findings_of(results)
    assert not findings and not (report / "story.json").exists(), (
        f"the explorer failed the correct service {name}:\n{listed(findings)}")
    assert results["scenarios"] and all(s["verdict"] == "pass" for s in results["scenarios"]), [
        (s["name"], s["verdict"], s.get("reason"), s.get("unknown_reasons"))
        for s in results["scenarios"]]

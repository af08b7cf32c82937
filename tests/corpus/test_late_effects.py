"""A charge that shows late is late, not lost: a correct service whose effects route reads a
replica 0.9 s behind (two_routes with ``--effects-lag-ms``) answers 201 before its
charge can be counted, and ``run`` must count each such key again before it judges (the
late-charge look of ``ScenarioContext.collect_effects``, shared with the explorer)."""

from __future__ import annotations

import json
from pathlib import Path

from harness._runner import RunConfig, run_scenarios
from harness.reports import ReportDirectory
from harness.services._toxiproxy import ToxiproxyServer
from scenarios import get_scenario
from tests.corpus.conftest import corpus_target
from tests.corpus.correct import SEED, findings_of

#: The late-charge looks end 1 s after the first count, so any lag under a second shows by
#: then; 0.9 s leaves the first count room to come late on a loaded machine and still find
#: nothing (the test's premise).
LAG_MS = 900


def test_charges_a_lagging_replica_shows_late_are_not_reported_lost(
        report_dir: Path, toxiproxy_server: ToxiproxyServer) -> None:
    target = corpus_target("two_routes").with_start_args(["--effects-lag-ms", str(LAG_MS)])
    config = RunConfig(target=target, scenarios=[get_scenario("concurrent-retries")],
                       report_dir=report_dir, seed=SEED, toxiproxy=toxiproxy_server)
    result = run_scenarios(config, [ReportDirectory(report_dir)])
    results = json.loads((report_dir / "results.json").read_text())
    assert result.exit_code == 0, findings_of(results)
    events = [json.loads(line) for line in (report_dir / "history.jsonl").open()]
    counted_too_early = {(e["tenant"], e["key"]) for e in events
                         if e["f"] == "effects" and e.get("value", {}).get("count") == 0}
    assert counted_too_early, "no key was counted before its charge showed: the test tests nothing"

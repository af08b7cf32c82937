"""Findings are told by key: one card (and one line in the terminal, one script) per key with
all its properties, so short-ttl's 21 findings read as 7 keys; a page with hundreds of keys
shows the first in full, the next as a line each and counts the rest (results.json keeps every
one), and a load run's charts come before its findings."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from harness._outcomes import RunResult, ScenarioOutcome
from harness.judging._checker import CheckResult, PropertyResult
from harness.judging._findings import Finding
from harness.reports import render_html
from harness.reports._runview import CARDS, LISTED, run_view
from harness.reports._sections import parse_load
from harness.targets._loader import load_target

HARNESS = [sys.executable, "-m", "harness.cli"]


def test_short_ttl_is_told_as_seven_keys_with_three_properties_each(
        toxiproxy_server: object, tmp_path: Path) -> None:
    report = tmp_path / "run"
    done = subprocess.run([*HARNESS, "run", "--reference", "--flaw", "short-ttl", "--scenario",
                           "late-retry", "--seed", "3", "--quiet", "--report-dir", str(report)],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "COLUMNS": "200",
                               "TOXIPROXY_URL": toxiproxy_server.url})  # type: ignore[attr-defined]
    assert done.returncode == 1, done.stderr
    findings = json.loads((report / "results.json").read_text())["scenarios"][0]["findings"]
    keys = {f["key"] for f in findings}
    assert len(findings) == 3 * len(keys) and len(keys) >= 5
    said = done.stderr
    assert f"{len(findings)} finding(s) on {len(keys)} key(s)" in said
    assert said.count("P1 P2 P6 safety  in late-retry") == len(keys)
    assert said.count("reproduce: bash ") == len(keys)
    assert len({f["reproduce"] for f in findings}) == len(keys)  # a script per key
    page = (report / "index.html").read_text()
    assert page.count('<article class="finding') == len(keys)
    assert f"{len(findings)} findings on {len(keys)} keys" in page


def _many(keys: int) -> RunResult:
    findings = [Finding(prop, f"t/k{n}", f"{prop} broke for k{n}", ())
                for n in range(keys) for prop in ("P1", "P2")]
    results = {p: PropertyResult(p, "fail", tuple(f for f in findings if f.property == p))
               for p in ("P1", "P2")}
    outcome = ScenarioOutcome("load", "fail", ("P1", "P2"), CheckResult(results, findings))
    return RunResult(load_target("reference"), (outcome,), 1, "2026-01-01T00:00:00+00:00",
                     None, 86400.0, 30.0, True)


def test_a_page_of_many_keys_shows_some_in_full_lists_more_and_counts_the_rest() -> None:
    keys = CARDS + LISTED + 42
    view = run_view(_many(keys))
    assert (len(view.cards), len(view.listed), view.left_out) == (CARDS, LISTED, 42)
    assert [(s.column.id, s.findings, s.keys) for s in view.summary] == [
        ("P1", keys, keys), ("P2", keys, keys)]
    page = render_html(_many(keys))
    assert page.count('<article class="finding') == CARDS
    assert page.count('class="finding listed-finding') == LISTED
    assert "… and 42 more keys with findings, not shown: every finding is in results.json" in page


def test_a_load_runs_charts_come_before_its_findings() -> None:
    from harness.reports._sections import Sections

    load = parse_load({"figures": {"requests": 10}, "settings": {"users": 4},
                       "timeline": [{"t": 0, "requests_per_s": 5, "p50_ms": 1, "p95_ms": 2,
                                     "p99_ms": 3}, {"t": 1, "requests_per_s": 6, "p50_ms": 1,
                                                    "p95_ms": 2, "p99_ms": 3}]})
    page = render_html(_many(30), sections=Sections(load=load))
    chart = page.index('id="load"')
    assert chart < page.index('<article class="finding') and chart < page.index('id="scenarios"')
    assert len(re.findall(r'id="load"', page)) == 1

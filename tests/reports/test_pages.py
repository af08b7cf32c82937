"""The HTML pages as text: self-contained, the checker's verdicts and findings all present, the
other front ends' files turned into sections, and a damaged file costing only its section."""

from __future__ import annotations

import json
import re
from pathlib import Path

from markupsafe import escape

from harness import RunResult, ScenarioOutcome, load_target
from harness._outcomes import RunFinished
from harness.reports import ReportDirectory, render_html, render_index, write_index
from harness.reports._runview import run_view
from harness.reports._sections import read_sections
from tests.harness.stories import JSON, Story, replayed
from tests.reports.sample_sections import sample_load, sample_matrix, sample_story


def story_run(*, duplicate: bool, report_dir: Path | None = None) -> RunResult:
    story = Story()
    story.attempt("k1", None)
    second = "ch_2" if duplicate else "ch_1"
    story.attempt("k1", 201, attempt=2, resource=second, digest=f"d-{second}",
                  headers=JSON if duplicate else replayed())
    story.effects("k1", 2 if duplicate else 1, ids=["ch_1", "ch_2"] if duplicate else ["ch_1"])
    check = story.check()
    outcome = ScenarioOutcome("timeout-after-commit", check.verdict, ("P1", "P2", "P3"), check,
                              events=story.history.events(), seconds=0.4)
    skipped = ScenarioOutcome("late-retry", "n/a", ("P1", "P3", "P6"),
                              reason="target lacks a clock hook")
    return RunResult(load_target("reference"), (outcome, skipped), 7, "2024-06-07T10:00:00+00:00",
                     report_dir, 86400.0, 1.5)


def test_the_page_is_self_contained() -> None:
    html = render_html(story_run(duplicate=True))
    assert not re.search(r'(src|href)="(https?:)?//', html)
    assert "<link rel=\"stylesheet\"" not in html
    assert "<style>" in html and "<script>" in html
    # one diagram, drawn for a wide screen and for a phone
    assert html.count("<svg class=\"sequence wide\"") == 1
    assert html.count("<svg class=\"sequence narrow\"") == 1


def test_the_page_leads_with_the_verdict_and_explains_each_finding() -> None:
    result = story_run(duplicate=True)
    html = render_html(result)
    assert html.index('id="verdict"') < html.index('id="scenarios"') < html.index(
        'class="finding')
    assert 'data-verdict="fail"' in html
    for finding in result.findings:
        assert str(escape(finding.message)) in html
    assert "The card was charged more than once" in html
    assert "target lacks a clock hook" in html


def test_the_table_tells_exercised_properties_from_ones_held_in_passing() -> None:
    view = run_view(story_run(duplicate=True))
    row, skipped = view.rows
    cells = {p.id: c for p, c in zip(view.properties, row.cells, strict=True)}
    assert cells["P1"].verdict == "fail" and cells["P1"].anchor == "finding-1"
    assert cells["P3"].css == "pass" and cells["P7"].css == "quiet"
    assert {c.verdict for c in skipped.cells} == {"n/a"}


def test_a_passing_run_has_no_findings_and_says_so() -> None:
    html = render_html(story_run(duplicate=False))
    assert 'data-verdict="pass"' in html and "No findings" in html
    assert 'class="finding' not in html


def test_the_report_directory_writes_index_html_with_the_sections_beside_it(
        tmp_path: Path) -> None:
    (tmp_path / "story.json").write_text(json.dumps(sample_story()))
    result = story_run(duplicate=True, report_dir=tmp_path)
    ReportDirectory(tmp_path).handle(RunFinished(result))
    page = (tmp_path / "index.html").read_text()
    assert 'id="story"' in page and "state.retry(key=k1)" in page
    assert "<code>k1</code> 2 charges" in page  # what the key ended with
    assert page == render_index(result)


def test_sections_read_the_other_front_ends_files(tmp_path: Path) -> None:
    (tmp_path / "matrix.json").write_text(sample_matrix())
    (tmp_path / "load.json").write_text(json.dumps(sample_load()))
    sections = read_sections(tmp_path)
    assert sections.matrix is not None and sections.load is not None
    assert [r.label for r in sections.matrix.rows][1] == "flaw server-generated-key"
    assert sections.matrix.rows[2].problem is not None  # no-fencing: caught by nobody
    assert ("latency_ms.first.p99", "310.5") in sections.load.figures
    assert len(sections.load.timeline) == 61
    page = write_index(tmp_path).read_text()
    assert page.count("<svg") == 1 and 'class="chart"' in page
    assert "response-latency" in page and "caught (P1)" in page


def test_a_damaged_file_costs_its_section_not_the_page(tmp_path: Path) -> None:
    (tmp_path / "load.json").write_text('{"timeline": [{"t": "soon"}]}')
    (tmp_path / "story.json").write_text("{not json")
    result = story_run(duplicate=True, report_dir=tmp_path)
    page = render_index(result)
    assert "load.json could not be read" in page and "story.json could not be read" in page
    assert 'data-verdict="fail"' in page

"""The reports as a person sees them: opened in a real headless Chromium.

The failing and the passing run come from one real training demo (the reference server with
the server-generated-key flaw, then the correct server); the other sections from files shaped
like the ones the matrix, load runs and the explorer write.  Each test checks that the page
raises no console error, that the verdict and every finding are visible, that each diagram
rendered with a size, and saves a screenshot under test-output/reports/.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.reports.conftest import DemoRun, Opened
from tests.reports.sample_sections import write_sample_sections


def _visible_size(opened: Opened, selector: str) -> list[tuple[float, float]]:
    sizes = []
    for element in opened.page.locator(selector).all():
        box = element.bounding_box()
        assert box is not None, f"{selector} is not rendered"
        sizes.append((box["width"], box["height"]))
    return sizes


def _findings_of(run_dir: Path) -> list[dict[str, object]]:
    results = json.loads((run_dir / "results.json").read_text())
    return [f for s in results["scenarios"] for f in s["findings"]]


def test_a_failing_run_shows_its_verdict_findings_and_diagrams(
        demo_run: DemoRun, open_page: Callable[[Path], Opened]) -> None:
    run_dir = demo_run.directory / "flawed"
    findings = _findings_of(run_dir)
    assert findings, "the flawed server must have findings"

    opened = open_page(run_dir / "index.html")
    screenshot = opened.screenshot("failing-run")

    assert opened.errors == []
    verdict = opened.page.locator("#verdict")
    assert verdict.is_visible()
    assert "FAIL" in verdict.inner_text()
    cards = opened.page.locator("article.finding")
    assert cards.count() == len(findings)
    for card, finding in zip(cards.all(), _safety_first(findings), strict=True):
        assert card.is_visible()
        assert card.get_attribute("data-property") == finding["property"]
        assert str(finding["message"]) in card.inner_text()
    sizes = _visible_size(opened, "article.finding svg.sequence")
    assert len(sizes) == len(findings)
    assert all(width > 300 and height > 100 for width, height in sizes)
    assert opened.page.locator("article.finding svg.sequence .row.hl").count() >= len(findings)
    assert screenshot.stat().st_size > 10_000


def test_a_passing_run_says_so_and_has_no_findings(
        demo_run: DemoRun, open_page: Callable[[Path], Opened]) -> None:
    opened = open_page(demo_run.directory / "fixed" / "index.html")
    opened.screenshot("passing-run")

    assert opened.errors == []
    verdict = opened.page.locator("#verdict")
    assert verdict.is_visible()
    assert "PASS" in verdict.inner_text()
    assert opened.page.locator("article.finding").count() == 0
    assert opened.page.locator(".all-clear").first.is_visible()
    assert opened.page.locator("table.props tbody tr").count() == 1


def test_the_training_page_shows_the_flaw_the_fix_and_the_same_story_fixed(
        demo_run: DemoRun, open_page: Callable[[Path], Opened]) -> None:
    opened = open_page(demo_run.directory / "index.html")
    opened.screenshot("training-page")

    assert opened.errors == []
    assert "server-generated-key" in opened.page.locator("#lesson").inner_text()
    assert "FAIL" in opened.page.locator("#flawed-verdict").inner_text()
    assert "PASS" in opened.page.locator("#fixed-verdict").inner_text()
    flawed_cards = opened.page.locator("#flawed-run article.finding")
    assert flawed_cards.count() == len(_findings_of(demo_run.directory / "flawed"))
    assert all(card.is_visible() for card in flawed_cards.all())
    story = _visible_size(opened, "#fixed-run figure.diagram svg.sequence")
    assert len(story) == 1 and story[0][1] > 100
    assert "replay" in opened.page.locator("#fixed-run figure.diagram").inner_text()


def test_a_filter_hides_the_other_findings(demo_run: DemoRun,
                                           open_page: Callable[[Path], Opened]) -> None:
    opened = open_page(demo_run.directory / "flawed" / "index.html")
    cards = opened.page.locator("article.finding")
    total = cards.count()
    opened.page.locator("button[data-filter=safety]").click()
    safety = opened.page.locator("article.finding[data-klass=safety]")
    assert all(card.is_visible() for card in safety.all())
    assert sum(1 for card in cards.all() if card.is_visible()) == safety.count() <= total
    opened.page.locator("button[data-filter=all]").click()
    assert sum(1 for card in cards.all() if card.is_visible()) == total
    assert opened.errors == []


def test_matrix_load_and_explorer_sections_render(
        tmp_path: Path, demo_run: DemoRun, open_page: Callable[[Path], Opened]) -> None:
    page_path = write_sample_sections(tmp_path, row_report=demo_run.directory / "flawed")
    opened = open_page(page_path)
    opened.screenshot("sections")

    assert opened.errors == []
    matrix = opened.page.locator("#matrix table.matrix")
    assert matrix.is_visible()
    assert opened.page.locator("#matrix td.m-fail").count() >= 1
    assert opened.page.locator("#matrix td.m-pass").count() >= 1
    link = opened.page.locator("#matrix a", has_text="flaw server-generated-key")
    assert link.get_attribute("href") == "flaw%20server-generated-key/index.html"
    (chart,) = _visible_size(opened, "#load svg.chart")
    assert chart[0] > 500 and chart[1] > 200
    assert opened.page.locator("#load svg.chart text", has_text="response-latency").count() >= 1
    assert opened.page.locator("#load table.figures tr").count() >= 5
    assert opened.page.locator("#story ol.steps li").count() == 4
    assert opened.page.locator("#story").inner_text().count("state.") >= 4


def _safety_first(findings: list[dict[str, object]]) -> list[dict[str, object]]:
    return sorted(findings, key=lambda f: f["class"] != "safety")

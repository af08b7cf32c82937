"""``index.html``: a report a person would rather look at, in one self-contained file.

The verdict first, then scenarios by properties, then each finding in plain words with its
smallest event sequence drawn as a sequence diagram; and, when the report directory holds them,
the flaw matrix, a load run's charts and the explorer's shrunk story.  Styles and script are
inlined and nothing is fetched, so the page opens anywhere, offline, years later.

Every ``render_*`` returns the page as text; ``write_index`` is the separate step that writes it.
Jinja2 (like matplotlib for the charts) is imported on the first page rendered, not with this
module: every CLI command imports the report handlers, and most never render a page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from harness._outcomes import RunResult
from harness.diagrams._model import Diagram
from harness.reports._files import write_atomic
from harness.reports._narrow import narrowed
from harness.reports._results import tool_version
from harness.reports._runview import RunView, counterpart, run_view
from harness.reports._sections import Sections, read_sections

if TYPE_CHECKING:
    from jinja2 import Environment

__all__ = [
    "Lesson",
    "render_directory_html",
    "render_html",
    "render_index",
    "render_lesson_html",
    "write_index",
]


@cache
def _templates() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    return Environment(
        loader=PackageLoader("harness.reports", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


@dataclass(frozen=True)
class Lesson:
    """A training page's story: the mistake, where the seed names it, the scenario that shows it."""

    name: str
    summary: str
    mistake: tuple[str, ...]
    pitfall: str | None
    scenario: str
    story: str
    plan: tuple[str, ...]


@dataclass(frozen=True)
class _RunBlock:
    view: RunView
    nav: str
    heading: str | None = None
    intro: str | None = None
    href: str | None = None
    story: Diagram | None = None

    @property
    def narrow_story(self) -> Diagram | None:
        return narrowed(self.story) if self.story is not None else None


def render_html(result: RunResult, *, sections: Sections | None = None) -> str:
    """The page of one run, with any other sections given."""
    return _page(f"{result.target.name}: {result.verdict.upper()}",
                 subtitle=result.target.description or None,
                 runs=[_RunBlock(run_view(result), "verdict")],
                 sections=sections or Sections())


def render_index(result: RunResult) -> str:
    """The run's page with whatever the matrix, load runs or the explorer left beside it; the
    report directory's renderer for ``index.html``."""
    sections = read_sections(result.report_dir) if result.report_dir else Sections()
    return render_html(result, sections=sections)


def render_directory_html(directory: Path, *, title: str | None = None) -> str:
    """A page of the sections found in ``directory``, for a report without a run of its own."""
    sections = read_sections(directory)
    return _page(title or _title_for(sections), subtitle=str(directory), runs=[],
                 sections=sections)


def render_lesson_html(lesson: Lesson, flawed: RunResult, fixed: RunResult, *,
                       flawed_href: str | None = None, fixed_href: str | None = None) -> str:
    """The training page: the mistake, what the flawed server did, what the correct one did."""
    runs = [
        _RunBlock(run_view(flawed, prefix="flawed-"), "with the flaw",
                  f"With the flaw: {flawed.verdict.upper()}",
                  f"The {lesson.scenario} scenario against the reference server started with "
                  f"--flaw {lesson.name}.", flawed_href),
        _RunBlock(run_view(fixed, prefix="fixed-"), "with the fix",
                  f"With the fix: {fixed.verdict.upper()}",
                  "The same scenario against the correct reference server.", fixed_href,
                  counterpart(flawed, fixed)),
    ]
    return _page(f"Training: {lesson.name}", subtitle=lesson.summary, runs=runs,
                 sections=Sections(), lesson=lesson)


def write_index(directory: Path, result: RunResult | None = None) -> Path:
    """Render ``index.html`` for ``directory`` (the run's page when ``result`` is given, else
    the sections found there) and write it atomically; for front ends that add a file such as
    ``load.json`` after their run."""
    page = (render_html(result, sections=read_sections(directory)) if result is not None
            else render_directory_html(directory))
    path = directory / "index.html"
    write_atomic(path, page)
    return path


def _title_for(sections: Sections) -> str:
    if sections.matrix:
        return f"idem-harness: {sections.matrix.title.lower()}"
    if sections.story:
        return f"idem-harness explorer: {sections.story.property or 'story'}"
    if sections.load:
        return "idem-harness: load"
    return "idem-harness report"


def _page(title: str, *, subtitle: str | None, runs: Sequence[_RunBlock], sections: Sections,
          lesson: Lesson | None = None) -> str:
    chart = None
    if sections.load and sections.load.timeline:
        from markupsafe import Markup

        from harness.reports._charts import load_chart  # matplotlib only when there is a chart

        chart = Markup(load_chart(sections.load.timeline, sections.load.fault_windows))
    return _templates().get_template("page.html.j2").render(
        title=title, subtitle=subtitle, runs=runs, sections=sections, lesson=lesson,
        load_chart=chart, tool=f"idem-harness {tool_version()}",
    )

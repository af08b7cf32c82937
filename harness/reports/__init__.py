"""Report formats: handlers over a run's events that render, never judge."""

from harness.reports._console import ConsoleReport, summary_table
from harness.reports._directory import ReportDirectory, write_report
from harness.reports._files import write_atomic
from harness.reports._html import (
    Lesson,
    render_directory_html,
    render_html,
    render_index,
    render_lesson_html,
    write_index,
)
from harness.reports._junit import render_junit
from harness.reports._results import load_run, render_history, render_results

__all__ = [
    "ConsoleReport",
    "Lesson",
    "ReportDirectory",
    "load_run",
    "render_directory_html",
    "render_history",
    "render_html",
    "render_index",
    "render_junit",
    "render_lesson_html",
    "render_results",
    "summary_table",
    "write_atomic",
    "write_index",
    "write_report",
]

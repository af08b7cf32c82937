"""Report formats: handlers over a run's events that render, never judge."""

from harness.reports._console import ConsoleReport, summary_table
from harness.reports._directory import ReportDirectory, write_report
from harness.reports._files import write_atomic
from harness.reports._junit import render_junit
from harness.reports._results import load_run, render_history, render_results

__all__ = [
    "ConsoleReport",
    "ReportDirectory",
    "load_run",
    "render_history",
    "render_junit",
    "render_results",
    "summary_table",
    "write_atomic",
    "write_report",
]

"""What the Locust process that keeps the statistics leaves behind for the load command.

``HistoryCollector`` receives every node's history message (a local run sends it to itself) and
writes it to the work directory, one JSON line per event, times in wall-clock seconds.
``LocustFiles`` writes Locust's own CSV and HTML reports into the report directory: they are
views of Locust's ``RequestStats``, produced by Locust's own writers.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment
from locust.html import get_html_report
from locust.rpc import Message
from locust.stats import PERCENTILES_TO_REPORT, StatsCSVFileWriter, stats_history

from harness.http.load._plan import NODES_FILE, events_file

__all__ = ["HistoryCollector", "LocustFiles"]


class HistoryCollector:
    """Writes each node's history as it arrives; ``wait`` returns once every node has sent."""

    def __init__(self, work_dir: Path, *, expected: int) -> None:
        self.work_dir = work_dir
        self.expected = expected
        self.nodes: list[dict[str, Any]] = []
        self._complete = gevent.event.Event()

    def receive(self, environment: Environment, msg: Message, **_: Any) -> None:
        data = msg.data
        node = str(data["node"])
        events = data["events"]
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with events_file(self.work_dir, node).open("w", encoding="utf-8") as handle:
            for event in events:
                handle.write(json.dumps(event, sort_keys=True) + "\n")
        self.nodes.append({"node": node, "events": len(events),
                           "cpu_seconds": data["cpu_seconds"],
                           "charges_cut": data["charges_cut"]})
        if len(self.nodes) >= self.expected:
            self._complete.set()

    def wait(self, timeout: float) -> bool:
        return bool(self._complete.wait(timeout))

    def write_summary(self, **extra: Any) -> None:
        document = {"nodes": self.nodes, **extra}
        (self.work_dir / NODES_FILE).write_text(json.dumps(document, indent=2) + "\n",
                                                encoding="utf-8")


class LocustFiles:
    """Locust's CSV files (``locust_stats.csv``, ``locust_stats_history.csv``,
    ``locust_failures.csv``, ``locust_exceptions.csv``) and ``locust.html``."""

    PREFIX = "locust"

    def __init__(self, environment: Environment, report_dir: Path) -> None:
        report_dir.mkdir(parents=True, exist_ok=True)
        self.environment = environment
        self.report_dir = report_dir
        self._writer = StatsCSVFileWriter(environment, PERCENTILES_TO_REPORT,
                                          str(report_dir / self.PREFIX), full_history=True)
        self._greenlets = [gevent.spawn(self._writer.stats_writer),
                           gevent.spawn(stats_history, environment.runner)]

    def finish(self) -> None:
        """Stop the periodic writers and write the final tables and the HTML report."""
        gevent.killall(self._greenlets)
        self._writer.close_files()
        finals: list[tuple[str, Callable[[Any], None]]] = [
            ("_stats.csv", self._writer.requests_csv),
            ("_failures.csv", self._writer.failures_csv),
            ("_exceptions.csv", self._writer.exceptions_csv),
        ]
        for suffix, write in finals:
            with (self.report_dir / f"{self.PREFIX}{suffix}").open(
                    "w", newline="", encoding="utf-8") as handle:
                write(csv.writer(handle))
        html = get_html_report(self.environment, show_download_link=False)  # type: ignore[no-untyped-call]
        (self.report_dir / f"{self.PREFIX}.html").write_text(html, encoding="utf-8")

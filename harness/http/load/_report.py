"""A load run's files and its terminal summary: views of the result, judging nothing.

The run's history, results.json and junit.xml are written by the same code as ``idem-harness
run`` (one scenario named ``load``, judged on P1, P2, P4 and P5).  ``load.json`` adds what only
a load run has, in the shape the HTML report charts: ``figures``, a per-second ``timeline`` and
the ``fault_windows`` to shade, plus the CPU split, the chaos schedule, the settings and what the
run did not exercise.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from harness._errors import ReportNotWritten
from harness.http.load._run import LOAD_PROPERTIES, LoadResult
from harness.reports import write_atomic, write_report
from harness.reports._runview import by_key

__all__ = ["LOAD_FILE", "load_summary", "render_load_json", "write_load_report"]

LOAD_FILE = "load.json"
FINDINGS_SHOWN = 10
VERDICT_STYLES = {"pass": "green", "inconclusive": "bold yellow"}


def render_load_json(result: LoadResult) -> str:
    document = {
        "figures": result.figures,
        "timeline": result.timeline,
        "fault_windows": result.fault_windows,
        "cpu": result.cpu.to_json(),
        "schedule": [asdict(window) for window in result.schedule],
        "settings": {"target": result.run.target.name, **result.settings},
        "problems": list(result.problems),
        "not_exercised": list(result.not_exercised),
    }
    return json.dumps(document, indent=2) + "\n"


def write_load_report(result: LoadResult, directory: Path) -> None:
    """load.json first, then every file a run writes, so the page (index.html) finds the
    charts' data beside it."""
    try:
        write_atomic(directory / LOAD_FILE, render_load_json(result))
    except OSError as exc:
        raise ReportNotWritten(str(directory), exc.strerror or str(exc)) from exc
    write_report(result.run, directory)


def _ms(shares: dict[str, Any]) -> str:
    def one(value: Any) -> str:
        return "-" if value is None else f"{value:.1f}"

    return f"{one(shares['p50'])} / {one(shares['p95'])} / {one(shares['p99'])}"


def _figures_table(result: LoadResult) -> Table:
    f = result.figures
    cpu = result.cpu
    table = Table(title="load figures", title_justify="left", show_header=False)
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [
        ("requests (attempts)", f"{f['requests']} in {f['seconds']:.1f}s = "
                                f"{f['requests_per_s']:.1f}/s"),
        ("charges (keys)", f"{f['keys']} = {f['charges_per_s']:.1f}/s"),
        ("first attempts p50/p95/p99 ms", _ms(f["latency_ms"]["first"])),
        ("retries p50/p95/p99 ms", _ms(f["latency_ms"]["retry"])),
        ("retries per key (mean, max)", f"{f['retries_per_key']['mean']:.2f}, "
                                        f"{f['retries_per_key']['max']}"),
        ("double submits, reuses (refused)", f"{f['double_submits']}, {f['reuses']} "
                                             f"({f['reuses_refused']})"),
        ("409 in progress", str(f["status_409"])),
        ("replays", "n/a" if f["replays"] is None else str(f["replays"])),
        ("give-ups", str(f["give_ups"])),
        ("no answer", ", ".join(f"{k} {v}" for k, v in f["no_answer"].items()) or "0"),
        ("faults, crashes", f"{f['faults']}, {f['crashes']}"),
        ("duplicates (keys; extra charges)", f"{f['duplicates']}; {f['extra_charges']}"),
        ("lost outcomes", str(f["lost_outcomes"])),
        ("CPU s: Locust / servers / Toxiproxy / other",
         f"{cpu.locust_seconds:.1f} / {cpu.servers_seconds:.1f} / "
         f"{cpu.toxiproxy_seconds:.1f} / {cpu.other_seconds:.1f}"),
    ]
    for name, value in rows:
        style = "bold red" if name.startswith(("duplicates", "lost")) and value[0] != "0" else ""
        table.add_row(name, Text(value, style=style))
    return table


def load_summary(result: LoadResult) -> RenderableType:
    """The figures, the first findings with their keys, what was not exercised, and the
    verdict."""
    parts: list[RenderableType] = [_figures_table(result)]
    check = result.check
    findings = check.findings if check else []
    keys = by_key(findings)
    for group in keys[:FINDINGS_SHOWN]:  # a key's findings together, one reproduction
        first = group[0]
        safety = any(f.klass == "safety" for f in group)
        properties = " ".join(dict.fromkeys(f.property for f in group))
        parts.append(Text.assemble((f"{properties} {'safety' if safety else 'conformance'}",
                                    "bold red" if safety else "yellow"), f" {first.key or ''}"))
        for finding in group:
            said = f"{finding.property}: " if len(group) > 1 else ""
            parts.append(Text(f"  {said}{finding.message}"))
        if first.reproduce:
            parts.append(Text(f"  reproduce: {first.reproduce}", style="dim"))
    if len(keys) > FINDINGS_SHOWN:
        parts.append(Text(f"... and {len(keys) - FINDINGS_SHOWN} more keys with findings in "
                          "results.json", style="dim"))
    for problem in result.problems:
        parts.append(Text(f"problem: {problem}", style="yellow"))
    for shortfall in result.not_exercised:
        parts.append(Text(f"not exercised: {shortfall}", style="yellow"))
    verdict = result.run.verdict
    parts.append(Text.assemble(
        ("\n" + verdict.upper(), VERDICT_STYLES.get(verdict, "bold red")),
        "".join(f" · {p} {_verdict(result, p)}" for p in LOAD_PROPERTIES),
        f" · {len(findings)} finding(s) · report in {result.run.report_dir}"))
    return Group(*parts)


def _verdict(result: LoadResult, property_id: str) -> str:
    check = result.check
    if check is None or property_id not in check.results:
        return "not judged"
    return check.results[property_id].verdict

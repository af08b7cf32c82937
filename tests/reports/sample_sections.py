"""Files shaped like the ones other front ends write beside a report: the flaw matrix
(``render_matrix_json`` itself), a load run's ``load.json`` (the shape of harness/http/load's
``render_load_json``, gaps included) and the explorer's ``story.json``."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from harness import load_target
from harness._matrix import Matrix, MatrixCell, MatrixRow, render_matrix_json
from harness.reports import write_index

SCENARIOS = ["timeout-after-commit", "key-reuse"]


def sample_matrix() -> str:
    target = load_target("reference")
    correct = MatrixRow("correct (sqlite)", target, "correct")
    flawed = MatrixRow("flaw server-generated-key", target, "flaw", ("P1", "P3"))
    missed = MatrixRow("flaw no-fencing", target, "flaw", ("P1", "P2"))
    matrix = Matrix(SCENARIOS, [correct, flawed, missed])
    matrix.cells = {
        (correct.label, SCENARIOS[0]): MatrixCell("pass"),
        (correct.label, SCENARIOS[1]): MatrixCell("pass"),
        (flawed.label, SCENARIOS[0]): MatrixCell("fail", ("P1",)),
        (flawed.label, SCENARIOS[1]): MatrixCell("fail", ("P1", "P2", "P4")),
        (missed.label, SCENARIOS[0]): MatrixCell("pass"),
        (missed.label, SCENARIOS[1]): MatrixCell("n/a", (), "target lacks a slow hook"),
    }
    return render_matrix_json(matrix)


def sample_load() -> dict[str, object]:
    timeline: list[dict[str, object]] = []
    for second in range(60):
        slowed = 20 <= second < 30
        timeline.append({
            "t": second,
            "requests_per_s": 180.0 + 15 * math.sin(second / 3) - (90 if slowed else 0),
            "p50_ms": 4.0 + (300 if slowed else 0),
            "p95_ms": 11.0 + (380 if slowed else 0),
            "p99_ms": 25.0 + (420 if slowed else 0),
        })
    timeline.append({"t": 60, "requests_per_s": 0.0, "p50_ms": None, "p95_ms": None,
                     "p99_ms": None})
    return {
        "figures": {"seconds": 60.2, "requests": 10412, "requests_per_s": 172.96, "keys": 9987,
                    "duplicates": 0,
                    "latency_ms": {"first": {"p50": 4.1, "p95": 12.0, "p99": 310.5,
                                             "count": 9987}}},
        "timeline": timeline,
        "fault_windows": [{"start": 20.0, "end": 30.0, "fault": "response-latency"},
                          {"start": 42.0, "end": 43.5, "fault": "crash", "instance": 0}],
        "cpu": {"target": 0.61}, "schedule": [], "settings": {}, "problems": [],
    }


def sample_story() -> dict[str, object]:
    return {
        "seed": 1234, "examples": 57, "seconds": 4.2, "property": "P1",
        "message": "2 charges for key k1 where at most 1 may exist",
        "target": "reference-server",
        "steps": [
            {"number": 1, "kind": "send", "text": "state.send(key=k1)",
             "response": "no answer (timeout)", "effects": None},
            {"number": 2, "kind": "fault", "text": "state.fault('response-timeout')",
             "response": None, "effects": None},
            {"number": 3, "kind": "retry", "text": "state.retry(key=k1)",
             "response": "201 ch_2", "effects": 2},
            {"number": 4, "kind": "check", "text": "state.teardown()", "response": None,
             "effects": None},
        ],
        "charges": {"k1": 2},
    }


def write_sample_sections(directory: Path, *, row_report: Path | None = None) -> Path:
    """Write the three files (and, when given, a row's report to link to); then the page."""
    (directory / "matrix.json").write_text(sample_matrix())
    (directory / "load.json").write_text(json.dumps(sample_load()))
    (directory / "story.json").write_text(json.dumps(sample_story()))
    if row_report is not None:
        shutil.copytree(row_report, directory / "flaw server-generated-key",
                        ignore=shutil.ignore_patterns("target"))
    return write_index(directory)

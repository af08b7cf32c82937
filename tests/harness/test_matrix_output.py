"""``idem-harness matrix`` in a terminal (issue 14 item 15): a line per row as each finishes,
then a table that fits 100 columns, naming the scenarios that found something and what."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from harness._matrix import Matrix, MatrixCell, MatrixRow, render_matrix_lines
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from scenarios import CATALOG


def test_a_line_per_row_as_it_finishes_then_a_table_within_100_columns(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "matrix", "--flaw", "no-body-hash",
         "--scenario", "key-reuse", "--scenario", "missing-key", "--seed", "3", "--jobs", "2",
         "--report-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=240,
        env={**os.environ, "TOXIPROXY_URL": toxiproxy_server.url})
    assert done.returncode == 0, done.stdout + done.stderr
    progress = [line for line in done.stderr.splitlines()
                if line.startswith(("correct (sqlite)", "flaw no-body-hash"))]
    assert len(progress) == 2, done.stderr
    assert any("key-reuse: P4" in line for line in progress)
    table = done.stdout.split("matrix written to")[0]  # then the report's path
    assert all(len(line) <= 100 for line in table.splitlines()), done.stdout
    assert "flaw no-body-hash" in done.stdout and "All rows as expected." in done.stdout
    assert (tmp_path / "matrix.md").exists() and (tmp_path / "matrix.json").exists()


def test_a_row_that_found_much_wraps_within_100_columns() -> None:
    names = list(CATALOG)
    row = MatrixRow("flaw with a rather long name indeed", reference_target(store=None, flaw=None),
                    "flaw", ("P1", "P2"))
    matrix = Matrix(names, [row])
    for name in names:
        matrix.cells[(row.label, name)] = MatrixCell("fail", ("P1", "P2", "P9"))
    text = render_matrix_lines(matrix)
    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert f"{names[-1]}: P1, P2, P9" in " ".join(text.split())  # wherever it wrapped
    assert "All rows as expected." in text


def test_ctrl_c_stops_the_rows_and_writes_what_finished(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """Ctrl-C once the first row has finished: the second row, under way, stops at its next
    step and the third never begins; the table and matrix.json say so, and the command exits
    as SIGINT does (130) instead of playing the rest."""
    matrix_run = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "matrix", "--flaw", "no-body-hash",
         "--flaw", "short-ttl", "--scenario", "key-reuse", "--scenario", "in-flight-retry",
         "--seed", "3", "--jobs", "2", "--rows", "1", "--report-dir", str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "TOXIPROXY_URL": toxiproxy_server.url})
    try:
        assert matrix_run.stderr is not None
        progress = []
        for line in matrix_run.stderr:  # ends with the process, so bounded by the timeout below
            progress.append(line)
            if line.startswith("correct (sqlite)"):
                matrix_run.send_signal(signal.SIGINT)
                break
        stdout, stderr = matrix_run.communicate(timeout=120)
    finally:
        matrix_run.kill()
    assert matrix_run.returncode == 130, "".join(progress) + stderr + stdout
    assert "Stopped by SIGINT: 1 of 3 rows ran every scenario" in stdout, stdout
    table = re.sub(r"\n +", " ", stdout)  # a row's wrapped lines as one
    never_begun = next(line for line in table.splitlines() if line.startswith("flaw short-ttl"))
    assert "stopped" in never_begun and "not run: key-reuse, in-flight-retry" in never_begun
    written = json.loads((tmp_path / "matrix.json").read_text())
    assert written["stopped_by"] == "SIGINT"
    assert [row["finished"] for row in written["rows"]] == [True, False, False]
    assert {cell["verdict"] for cell in written["rows"][2]["cells"].values()} == {"not run"}
    assert written["rows"][1]["cells"]["in-flight-retry"]["verdict"] == "not run"
    page = (tmp_path / "index.html").read_text()
    assert "Stopped by SIGINT before every row had run" in page
    assert page.count('class="m-stopped"') == 2 and "Every row came out as expected" not in page

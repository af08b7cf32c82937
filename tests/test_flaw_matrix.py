"""The flaw matrix: every scenario against the correct reference server (SQLite and PostgreSQL)
finds nothing, and every named flaw is caught by some scenario under the property it breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness._matrix import Matrix, MatrixRow, run_matrix
from harness.services._postgres import PostgresServer
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from reference_server.flaws import FLAWS
from scenarios import default_scenarios


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer,
           toxiproxy_server: ToxiproxyServer) -> Matrix:
    dsn = postgres_server.create_database("flaw_matrix")
    rows = [
        MatrixRow("correct-sqlite", reference_target(store=None, flaw=None), "correct"),
        MatrixRow("correct-postgresql", reference_target(store=dsn, flaw=None), "correct"),
        *(MatrixRow(f"flaw-{name}", reference_target(store=None, flaw=name), "flaw",
                    flaw.properties) for name, flaw in FLAWS.items()),
    ]
    return run_matrix(rows, default_scenarios(rows[0].target), tmp_path_factory.mktemp("matrix"),
                      seed=1234)


def test_the_correct_server_holds_everywhere(matrix: Matrix) -> None:
    for row in (r for r in matrix.rows if r.kind == "correct"):
        verdicts = {s: matrix.cells[(row.label, s)].verdict for s in matrix.scenarios}
        assert set(verdicts.values()) <= {"pass", "n/a"}, (row.label, verdicts)


def test_only_the_database_scenarios_need_postgresql(matrix: Matrix) -> None:
    """Store outages and faults at a commit need a network between server and store: n/a on
    SQLite, run on PostgreSQL."""
    sqlite = {s for s in matrix.scenarios if matrix.cells[("correct-sqlite", s)].verdict == "n/a"}
    postgres = {s for s in matrix.scenarios
                if matrix.cells[("correct-postgresql", s)].verdict == "n/a"}
    assert sqlite == {"store-outage", "cut-after-commit"}
    assert postgres == set()


@pytest.mark.parametrize("flaw", sorted(FLAWS))
def test_each_flaw_is_caught_under_a_property_it_breaks(matrix: Matrix, flaw: str) -> None:
    row = next(r for r in matrix.rows if r.label == f"flaw-{flaw}")
    caught = matrix.caught(row)
    assert caught & set(FLAWS[flaw].properties), (
        f"{flaw} should break {FLAWS[flaw].properties}; scenarios found {sorted(caught)}")


def test_the_matrix_reports_no_problem(matrix: Matrix, tmp_path: Path) -> None:
    assert matrix.problems() == []

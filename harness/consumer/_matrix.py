"""The matrix's consumer rows: the reference consumer, correct and with each named flaw."""

from __future__ import annotations

from harness._matrix import MatrixRow
from harness.consumer._reference import reference_consumer_target
from harness.services._postgres import PostgresServer

__all__ = ["consumer_rows"]


def consumer_rows(*, flaws: bool, postgres: PostgresServer | None) -> list[MatrixRow]:
    from reference_server.consumer.flaws import CONSUMER_FLAWS

    rows = [MatrixRow("consumer correct (sqlite)",
                      reference_consumer_target(store=None, flaw=None), "correct")]
    if postgres is not None:
        store = postgres.create_database("idem_consumer_matrix")
        rows.append(MatrixRow("consumer correct (postgresql)",
                              reference_consumer_target(store=store, flaw=None), "correct"))
    if flaws:
        rows += [MatrixRow(f"consumer flaw {flaw.name}",
                           reference_consumer_target(store=None, flaw=flaw.name), "flaw",
                           flaw.properties)
                 for flaw in CONSUMER_FLAWS.values()]
    return rows

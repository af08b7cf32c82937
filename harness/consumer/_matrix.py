"""The matrix's consumer rows: the reference consumer, correct and with each named flaw."""

from __future__ import annotations

from collections.abc import Sequence

from harness._matrix import MatrixRow
from harness._scenario import Scenario
from harness.consumer._reference import reference_consumer_target
from harness.consumer._scenario import ConsumerScenario
from harness.services._postgres import PostgresServer

__all__ = ["consumer_rows", "scenarios_for"]


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


def scenarios_for(scenarios: Sequence[Scenario], *, http: bool,
                  consumers: bool) -> list[Scenario]:
    """The columns for the kinds of rows present: a column no row can play is only n/a."""
    return [s for s in scenarios
            if (consumers if isinstance(s, ConsumerScenario) else http)]

"""Every consumer scenario against the real reference consumer, on a real RabbitMQ, through a
real Toxiproxy: the correct consumer holds on SQLite and on PostgreSQL (a scenario only Kafka can
play is n/a, saying so), and the matrix's consumer rows catch each named flaw with the property
it breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness._matrix import run_matrix
from harness._runner import RunConfig
from harness.consumer import ConsumerScenario, reference_consumer_target, run_target
from harness.consumer._matrix import consumer_rows
from harness.services._postgres import PostgresServer
from harness.services._toxiproxy import ToxiproxyServer
from scenarios import CATALOG

CONSUMER_SCENARIOS = [s for s in CATALOG.values() if isinstance(s, ConsumerScenario)]
#: The scenario that shows each flaw (docs/consumers.md); the slowest scenario,
#: redelivered-while-working, is played by the correct consumer only.
SHOWN_BY = {
    "ack-before-work": "consumer-crash",
    "no-dedup": "lost-ack",
    "dedup-after-work": "burst-of-copies",
    "message-id-only": "republish-after-lost-confirm",
    "check-then-insert": "burst-of-copies",
    "short-dedup-window": "late-redelivery",
    "poison-requeue-forever": "poison-message",
}


#: The scenarios only a Kafka broker can play (a group's rebalance, its offsets set back).
KAFKA_ONLY = {"rebalance-while-working", "cold-reassignment", "offset-reset"}


def test_every_consumer_scenario_is_in_the_catalog() -> None:
    assert len(CONSUMER_SCENARIOS) == 11
    assert {s.name for s in CONSUMER_SCENARIOS} >= set(SHOWN_BY.values()) | KAFKA_ONLY


@pytest.mark.parametrize("store", ["sqlite", "postgresql"])
def test_the_correct_consumer_passes_every_scenario(
        store: str, broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    dsn = None
    if store == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        dsn = server.create_database("idem_consumer_test")
    target = reference_consumer_target(store=dsn, flaw=None)
    result = run_target(RunConfig(target=target, scenarios=CONSUMER_SCENARIOS,
                                  report_dir=tmp_path, seed=7, toxiproxy=toxiproxy_server))
    verdicts = {o.name: (o.verdict, o.reason, [f.message for f in o.findings],
                         [r.reason for r in (o.check.results.values() if o.check else [])
                          if r.verdict != "pass"])
                for o in result.outcomes}
    assert {name: v[0] for name, v in verdicts.items()} == {
        s.name: "n/a" if s.name in KAFKA_ONLY else "pass" for s in CONSUMER_SCENARIOS}, verdicts
    assert all("Kafka" in str(verdicts[name][1]) for name in KAFKA_ONLY), verdicts
    assert result.exit_code == 0


def test_the_matrix_catches_every_consumer_flaw_with_its_property(
        broker: str, tmp_path: Path) -> None:
    rows = consumer_rows(flaws=True, postgres=None)
    scenarios = [s for s in CONSUMER_SCENARIOS if s.name in set(SHOWN_BY.values())]
    matrix = run_matrix(rows, scenarios, tmp_path, seed=11, jobs=1, rows_at_once=4)
    assert matrix.problems() == []
    assert {r.label for r in rows} == {"consumer correct (sqlite)",
                                       *(f"consumer flaw {f}" for f in SHOWN_BY)}
    for flaw, scenario in SHOWN_BY.items():
        cell = matrix.cells[(f"consumer flaw {flaw}", scenario)]
        expected = next(r for r in rows if r.label == f"consumer flaw {flaw}").expected
        assert cell.verdict == "fail" and set(cell.properties) & set(expected), (flaw, cell)

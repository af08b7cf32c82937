"""The reference consumer as a target, started through this one function by every front end.

Its target file with the flags ``--reference-consumer``, ``--broker``, ``--store`` and
``--flaw`` pass on: on RabbitMQ (``consume``, the default) or on Kafka (``consume-kafka``),
each with its own named flaws."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Literal

from harness._errors import UsageError
from harness._outcomes import RunResult
from harness._scenario import Scenario
from harness.consumer._target import ConsumerTarget
from harness.targets._loader import load_target
from harness.targets._reference import FlawNames, check_flags, flaw_names, flaws_and_store

__all__ = ["BROKERS", "REFERENCE_CONSUMER", "REFERENCE_KAFKA_CONSUMER", "BrokerName",
           "reference_consumer_name", "reference_consumer_target", "run_reference_consumer"]

REFERENCE_CONSUMER = Path(__file__).parent / "targets" / "reference-consumer.toml"
REFERENCE_KAFKA_CONSUMER = Path(__file__).parent / "targets" / "reference-kafka-consumer.toml"
#: The brokers the reference consumer reads from (``--broker``).
BrokerName = Literal["rabbitmq", "kafka"]
BROKERS: tuple[BrokerName, ...] = ("rabbitmq", "kafka")


def reference_consumer_target(*, store: str | None, flaw: FlawNames,
                              broker: BrokerName = "rabbitmq") -> ConsumerTarget:
    """The reference consumer's target file for ``broker``, on ``store`` (default: SQLite in
    the run's work directory) and with ``flaw`` (that broker's named flaws).  Several consumers
    share the store, so a PostgreSQL store is one database they all open."""
    _check_consumer_flags(store=store, flaw=flaw, broker=broker)
    target = load_target(REFERENCE_KAFKA_CONSUMER if broker == "kafka" else REFERENCE_CONSUMER)
    assert isinstance(target, ConsumerTarget)
    args: list[str] = []
    if store:
        args += ["--store", store]
    for name in flaw_names(flaw):
        args += ["--flaw", name]
    named = target.model_copy(update={"name": reference_consumer_name(store=store, flaw=flaw,
                                                                      broker=broker)})
    return named.with_start_args(args) if args else named  # type: ignore[return-value]


def _check_consumer_flags(*, store: str | None, flaw: FlawNames, broker: BrokerName) -> None:
    from reference_server.consumer.flaws import consumer_flaws_named, kafka_consumer_flaws_named

    if broker not in BROKERS:
        raise UsageError(f"--broker {broker}: the reference consumer reads from "
                         f"{' or '.join(BROKERS)}")
    check_flags(store=store, flaw=flaw,
                combine=kafka_consumer_flaws_named if broker == "kafka"
                else consumer_flaws_named)


def reference_consumer_name(*, store: str | None, flaw: FlawNames,
                            broker: BrokerName = "rabbitmq") -> str:
    which = "reference-kafka-consumer" if broker == "kafka" else "reference-consumer"
    return f"{which} ({flaws_and_store(store=store, flaw=flaw)})"


def run_reference_consumer(scenarios: Sequence[Scenario], *, other_target: bool,
                           store: str | None, flaw: FlawNames, postgres: bool,
                           report_dir: Path, seed: int | None, retry_horizon: float,
                           quiet: bool, broker: BrokerName = "rabbitmq") -> RunResult:
    """``idem-harness run --reference-consumer [--broker kafka]``: the reference consumer on
    SQLite (or the given store, or a fresh PostgreSQL database with ``--postgres``), every
    scenario judged."""
    from harness._runner import RunConfig
    from harness.consumer._runner import run_target
    from harness.reports import ConsoleReport, ReportDirectory
    from harness.services._postgres import start_postgres

    if other_target:
        raise UsageError("give one of --target FILE, --reference and --reference-consumer")
    if postgres and store:
        raise UsageError("give --postgres (a fresh database) or --store URL, not both")
    reference_consumer_target(store=store, flaw=flaw, broker=broker)  # usage errors first
    with ExitStack() as stack:
        if postgres:
            store = stack.enter_context(start_postgres()).create_database("idem_consumer")
        target = reference_consumer_target(store=store, flaw=flaw, broker=broker)
        config = RunConfig(target=target, scenarios=scenarios, report_dir=report_dir,
                           seed=seed, retry_horizon=retry_horizon)
        return run_target(config, [ReportDirectory(report_dir), ConsoleReport(quiet=quiet)])

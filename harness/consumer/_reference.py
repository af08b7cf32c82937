"""The reference consumer as a target, started through this one function by every front end.

Its target file with the flags ``--reference-consumer``, ``--store`` and ``--flaw`` pass on."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from harness._errors import UsageError
from harness._outcomes import RunResult
from harness._scenario import Scenario
from harness.consumer._target import ConsumerTarget
from harness.targets._loader import load_target
from harness.targets._reference import FlawNames, check_flags, flaw_names, flaws_and_store

__all__ = ["REFERENCE_CONSUMER", "reference_consumer_name", "reference_consumer_target",
           "run_reference_consumer"]

REFERENCE_CONSUMER = Path(__file__).parent / "targets" / "reference-consumer.toml"


def reference_consumer_target(*, store: str | None, flaw: FlawNames) -> ConsumerTarget:
    """The reference consumer's target file, on ``store`` (default: SQLite in the run's work
    directory) and with ``flaw``.  Several consumers share the store, so a PostgreSQL store is
    one database they all open."""
    _check_consumer_flags(store=store, flaw=flaw)
    target = load_target(REFERENCE_CONSUMER)
    assert isinstance(target, ConsumerTarget)
    args: list[str] = []
    if store:
        args += ["--store", store]
    for name in flaw_names(flaw):
        args += ["--flaw", name]
    named = target.model_copy(update={"name": reference_consumer_name(store=store, flaw=flaw)})
    return named.with_start_args(args) if args else named  # type: ignore[return-value]


def _check_consumer_flags(*, store: str | None, flaw: FlawNames) -> None:
    from reference_server.consumer.flaws import consumer_flaws_named

    check_flags(store=store, flaw=flaw, combine=consumer_flaws_named)


def reference_consumer_name(*, store: str | None, flaw: FlawNames) -> str:
    return f"reference-consumer ({flaws_and_store(store=store, flaw=flaw)})"


def run_reference_consumer(scenarios: Sequence[Scenario], *, other_target: bool,
                           store: str | None, flaw: FlawNames, postgres: bool,
                           report_dir: Path, seed: int | None, retry_horizon: float,
                           quiet: bool) -> RunResult:
    """``idem-harness run --reference-consumer``: the reference consumer on SQLite (or the
    given store, or a fresh PostgreSQL database with ``--postgres``), every scenario judged."""
    from harness._runner import RunConfig
    from harness.consumer._runner import run_target
    from harness.reports import ConsoleReport, ReportDirectory
    from harness.services._postgres import start_postgres

    if other_target:
        raise UsageError("give one of --target FILE, --reference and --reference-consumer")
    if postgres and store:
        raise UsageError("give --postgres (a fresh database) or --store URL, not both")
    reference_consumer_target(store=store, flaw=flaw)  # usage errors before anything starts
    with ExitStack() as stack:
        if postgres:
            store = stack.enter_context(start_postgres()).create_database("idem_consumer")
        target = reference_consumer_target(store=store, flaw=flaw)
        config = RunConfig(target=target, scenarios=scenarios, report_dir=report_dir,
                           seed=seed, retry_horizon=retry_horizon)
        return run_target(config, [ReportDirectory(report_dir), ConsoleReport(quiet=quiet)])

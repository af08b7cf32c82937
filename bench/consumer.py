"""How long the consumer catalog takes beside the HTTP catalog: the correct reference consumer
through every consumer scenario, and the correct reference server through every HTTP one, both
on SQLite, each scenario timed.

Goal (issue 16): the consumer catalog on SQLite well under a minute on this 2-core machine.  The
broker is started once first (or ``IDEM_AMQP_URL``) and not counted: a run with the harness's own
node pays its boot (4-10 s here) once.  Run: `.venv/bin/python bench/consumer.py`.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from harness._runner import RunConfig
from harness.consumer import ConsumerScenario, reference_consumer_target, run_target
from harness.services._processes import stop_children_on_sigterm
from harness.services._rabbitmq import start_rabbitmq
from harness.targets._reference import reference_target
from scenarios import CATALOG

CONSUMER_GOAL = 60.0


def _timed(config: RunConfig) -> tuple[float, dict[str, float]]:
    started = time.monotonic()
    result = run_target(config)
    total = time.monotonic() - started
    bad = [o.name for o in result.outcomes if o.verdict not in ("pass", "n/a")]
    if bad:
        raise SystemExit(f"the correct target did not hold in {', '.join(bad)}: not a benchmark")
    return total, {o.name: o.seconds for o in result.outcomes if o.verdict != "n/a"}


def main() -> None:
    consumer = [s for s in CATALOG.values() if isinstance(s, ConsumerScenario)]
    http = [s for s in CATALOG.values() if not isinstance(s, ConsumerScenario)]
    with start_rabbitmq() as broker, tempfile.TemporaryDirectory() as scratch:
        os.environ["IDEM_AMQP_URL"] = broker.url
        consumer_total, consumer_each = _timed(RunConfig(
            target=reference_consumer_target(store=None, flaw=None), scenarios=consumer,
            report_dir=Path(scratch) / "consumer", seed=1))
        http_total, http_each = _timed(RunConfig(
            target=reference_target(store=None, flaw=None), scenarios=http,
            report_dir=Path(scratch) / "http", seed=1))
    print(f"{'scenario':<32}{'seconds':>9}")
    for name, seconds in {**consumer_each, **http_each}.items():
        print(f"{name:<32}{seconds:>9.1f}")
    print()
    met = "met" if consumer_total < CONSUMER_GOAL else "MISSED"
    print(f"consumer catalog ({len(consumer_each)} scenarios, SQLite): {consumer_total:6.1f} s "
          f"(goal < {CONSUMER_GOAL:.0f} s: {met})")
    print(f"HTTP catalog ({len(http_each)} scenarios, SQLite):      {http_total:6.1f} s")


if __name__ == "__main__":
    stop_children_on_sigterm()  # a SIGTERM stops the services it started too
    main()

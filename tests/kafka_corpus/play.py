"""One run of the harness against a Kafka corpus consumer (or the reference Kafka consumer): its
catalog, or a seeded exploration; in the test's own process, or as a process of its own.

``play(...)`` runs in the calling process, on whatever broker it shares (a test session's:
``harness.consumer._brokers.sharing``); ``python -m tests.kafka_corpus.play TARGET REPORT_DIR
[--flaw F] [--scenario S]... [--explore N] [--seed N] [--first-only]`` runs one in a process of
its own, on a throwaway broker (bench/kafka.py plays several at once so).  ``TARGET`` is a
corpus consumer's name (``confluent_inbox``...), ``reference`` for the reference Kafka consumer,
or a target file.  Either way the report lands in ``REPORT_DIR`` (results.json).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from harness._interrupts import interrupt_on_signals
from harness._runner import RunConfig
from harness.consumer import ConsumerTarget, reference_consumer_target, run_target
from harness.explore import ExploreConfig, explore
from harness.reports import ReportDirectory
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._loader import load_target
from scenarios import default_scenarios, get_scenario
from tests.kafka_corpus.support import TARGETS

__all__ = ["EXPLORE_STEPS", "play", "target_named"]

#: Steps per explored example: a few faults and jobs each, so a handful of examples stays short.
EXPLORE_STEPS = 8
#: Shrinking a corpus flaw's story: only "found or not" counts here.
SHRINK_SECONDS = 5.0


def target_named(name: str, flaw: str | None = None) -> ConsumerTarget:
    """A corpus consumer by name, ``reference`` (the reference Kafka consumer), or a target
    file; started with ``--flaw`` when one is given."""
    if name == "reference":
        return reference_consumer_target(store=None, flaw=flaw, broker="kafka")
    path = TARGETS / f"{name}.toml"
    target = load_target(path if path.exists() else name)
    assert isinstance(target, ConsumerTarget)
    return target.with_start_args(["--flaw", flaw]) if flaw else target  # type: ignore[return-value]


def play(target: ConsumerTarget, report_dir: Path, *, seed: int, scenarios: list[str] | None = None,
         explore_examples: int = 0, first_only: bool = False,
         toxiproxy: ToxiproxyServer | None = None) -> dict[str, Any]:
    """The catalog (or ``scenarios`` of it), or with ``explore_examples`` a seeded exploration
    of that many examples beside the opening; its results.json as data."""
    if explore_examples:
        explore(ExploreConfig(target=target, max_examples=explore_examples, seed=seed,
                              report_dir=report_dir, steps=EXPLORE_STEPS,
                              shrink_seconds=SHRINK_SECONDS, first_only=first_only,
                              toxiproxy=toxiproxy), [ReportDirectory(report_dir)])
    else:
        chosen = ([get_scenario(n) for n in scenarios] if scenarios
                  else default_scenarios(target))
        run_target(RunConfig(target=target, scenarios=chosen, seed=seed, report_dir=report_dir,
                             toxiproxy=toxiproxy), [ReportDirectory(report_dir)])
    results: dict[str, Any] = json.loads((report_dir / "results.json").read_text())
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--flaw")
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--explore", type=int, default=0, metavar="EXAMPLES")
    parser.add_argument("--first-only", action="store_true")
    args = parser.parse_args()
    interrupt_on_signals()  # stopped as the command is: its consumers and broker too
    results = play(target_named(args.target, args.flaw), args.report_dir, seed=args.seed,
                   scenarios=args.scenario, explore_examples=args.explore,
                   first_only=args.first_only)
    raise SystemExit({"pass": 0, "fail": 1}.get(results["verdict"], 3))


if __name__ == "__main__":
    main()

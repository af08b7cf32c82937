"""``python -m tests.consumer_corpus.play TARGET REPORT_DIR [--flaw F]... [--scenario S]...
[--explore N]``: one run of the harness against a corpus consumer, started with each ``--flaw``
given (several switch several on at once), its report written to REPORT_DIR; with ``--explore
N``, a seeded exploration of N examples instead of the scenarios.  A process of its own per
run, so the corpus's runs go side by side."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import load_target
from harness._interrupts import interrupt_on_signals
from harness._runner import RunConfig
from harness.consumer import ConsumerScenario, run_target
from harness.explore import ExploreConfig, explore
from harness.reports import ReportDirectory
from scenarios import CATALOG, get_scenario

SEED = 7
#: Steps per explored example: a few faults and jobs each, so a handful of examples stays short.
EXPLORE_STEPS = 8


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--flaw", action="append", default=[])
    parser.add_argument("--scenario", action="append", default=[])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--explore", type=int, default=0, metavar="EXAMPLES")
    parser.add_argument("--shrink-time", type=float, default=10.0, metavar="SECONDS",
                        help="with --explore: how long each failure may be shortened")
    args = parser.parse_args()
    interrupt_on_signals()  # stopped as the command is: its consumer and broker links too
    target = load_target(args.target)
    if args.flaw:
        target = target.with_start_args([arg for flaw in args.flaw for arg in ("--flaw", flaw)])
    if args.explore:
        done = explore(ExploreConfig(target=target, max_examples=args.explore, seed=args.seed,
                                     report_dir=args.report_dir, steps=EXPLORE_STEPS,
                                     shrink_seconds=args.shrink_time),
                       [ReportDirectory(args.report_dir)])
        raise SystemExit(done.result.exit_code)
    scenarios = ([get_scenario(n) for n in args.scenario] if args.scenario else
                 [s for s in CATALOG.values() if isinstance(s, ConsumerScenario)])
    result = run_target(RunConfig(target=target, scenarios=scenarios, seed=args.seed,
                                  report_dir=args.report_dir),
                        [ReportDirectory(args.report_dir)])
    raise SystemExit(result.exit_code)


if __name__ == "__main__":
    main()

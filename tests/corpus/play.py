"""``python -m tests.corpus.play TARGET REPORT_DIR [--flaw F]... --seed S --max-examples N
[--shrink-time SECONDS]``: one seeded exploration of a corpus service, started with each
``--flaw`` given (several switch several on at once), its report written to REPORT_DIR.  A
process of its own per exploration, so the corpus's explorations go side by side
(``idem-harness explore --target`` has no way to add a flaw to a target file's command)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import load_target
from harness._interrupts import interrupt_on_signals
from harness.explore import ExploreConfig, explore
from harness.reports import ReportDirectory


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("--flaw", action="append", default=[])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--max-examples", type=int, required=True)
    parser.add_argument("--shrink-time", type=float, default=10.0, metavar="SECONDS")
    args = parser.parse_args()
    interrupt_on_signals()  # stopped as the command is: its service too
    target = load_target(args.target)
    if args.flaw:
        target = target.with_start_args([arg for flaw in args.flaw for arg in ("--flaw", flaw)])
    done = explore(ExploreConfig(target=target, max_examples=args.max_examples, seed=args.seed,
                                 report_dir=args.report_dir, shrink_seconds=args.shrink_time),
                   [ReportDirectory(args.report_dir)])
    raise SystemExit(done.result.exit_code)


if __name__ == "__main__":
    main()

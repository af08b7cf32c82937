"""The catalog on PostgreSQL, one scenario after another and with scenarios at once, side by
side in one run (issue 17 part 2).

Goal: with ``--jobs`` (default: twice the cores, at most 8) the catalog takes at most half the
serial time, with the same verdicts.  Both runs start the reference server on a fresh
PostgreSQL database reached through a Toxiproxy proxy, as ``run --reference --postgres`` does;
scenarios that need the whole target run on an instance with a database of their own.

Run: `.venv/bin/python bench/parallel.py [--jobs N] [--seed N]`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness._outcomes import RunResult
from harness._runner import RunConfig, default_jobs, run_scenarios
from harness.cli._run import own_target
from harness.services._postgres import PostgresServer, start_postgres
from harness.services._processes import stop_children_on_sigterm
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.targets._reference import reference_target
from scenarios import CATALOG

GOAL_RATIO = 0.5


def _run(jobs: int, seed: int, server: PostgresServer, toxiproxy: ToxiproxyServer,
         scratch: Path) -> tuple[float, RunResult]:
    store = server.create_database(f"idem_bench_{jobs}")
    target = reference_target(store=store, flaw=None)
    started = time.monotonic()
    result = run_scenarios(RunConfig(
        target=target, scenarios=list(CATALOG.values()), report_dir=scratch / f"jobs-{jobs}",
        seed=seed, toxiproxy=toxiproxy, jobs=jobs,
        own_target=own_target(target, reference=True, store=store, flaw=None,
                              postgres=server)))
    return time.monotonic() - started, result


def _seconds(result: RunResult, name: str) -> float:
    return next(o.seconds for o in result.outcomes if o.name == name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=default_jobs())
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with start_toxiproxy() as toxiproxy, start_postgres() as server, \
            tempfile.TemporaryDirectory() as scratch:
        serial, one = _run(1, args.seed, server, toxiproxy, Path(scratch))
        at_once, many = _run(args.jobs, args.seed, server, toxiproxy, Path(scratch))
    same = ([(o.name, o.verdict) for o in one.outcomes]
            == [(o.name, o.verdict) for o in many.outcomes])
    ratio = at_once / serial
    print(f"catalog on PostgreSQL ({len(CATALOG)} scenarios, seed {args.seed})")
    print(f"  one after another: {serial:6.1f}s  ({one.verdict})")
    print(f"  {args.jobs} at once:        {at_once:6.1f}s  ({many.verdict})")
    longest = max(many.outcomes, key=lambda o: o.seconds)
    print(f"  longest scenario at once: {longest.name} {longest.seconds:.1f}s "
          f"(one after another: {_seconds(one, longest.name):.1f}s)")
    print(f"  ratio {ratio:.2f}  goal at most {GOAL_RATIO:.2f}  "
          f"{'met' if ratio <= GOAL_RATIO else 'NOT MET'}; same verdicts: "
          f"{'yes' if same else 'NO'}")


if __name__ == "__main__":
    stop_children_on_sigterm()  # a SIGTERM stops the services it started too
    main()

"""How fast the explorer finds each named flaw of the reference server, and how short it shrinks
the story; the correct server beside them, which must hold for the whole budget.

Issue 6 asks: every flaw found within the default budget (the profile's
``explore_max_examples``), shrunk to at most 6 operations, naming a property the flaw breaks;
no failure on the correct server (SQLite, and PostgreSQL with ``--postgres``); ``replay`` of a
saved story reproduces it (``--replay``).  Each row is one ``explore`` with a fixed seed, so the
run time is bounded by the budget and a second run draws the same stories.

Run: `.venv/bin/python bench/explorer.py [--seed N] [--max-examples N] [--flaw NAME ...]
[--postgres] [--replay]`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from harness._postgres import start_postgres
from harness._profiles import get_profile
from harness._reference import reference_target
from harness._target import Target
from harness._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.explore import ExploreConfig, ReplayConfig, explore, load_story, replay
from reference_server.flaws import FLAWS

MAX_OPERATIONS = 6


@dataclass(frozen=True)
class Row:
    name: str
    target: Target
    expected: tuple[str, ...]  # empty: the correct server, which must hold


def _explore(row: Row, args: argparse.Namespace, toxiproxy: ToxiproxyServer,
             scratch: Path) -> str:
    report_dir = scratch / row.name.replace(" ", "-")
    started = time.monotonic()
    done = explore(ExploreConfig(target=row.target, max_examples=args.max_examples,
                                 seed=args.seed, report_dir=report_dir, toxiproxy=toxiproxy))
    total = time.monotonic() - started
    story = done.story
    if story is None:
        verdict = "ok" if not row.expected else "MISSED"
        return (f"{row.name:<24}{'no':>6}{'-':>9}{'-':>9}{'-':>7}  {'-':<12}"
                f"{total:>8.1f}s  {verdict} ({done.result.outcomes[0].verdict})")
    named = sorted(set(story.properties) & set(row.expected))
    short = story.operations <= MAX_OPERATIONS
    verdict = ("ok" if row.expected and named and short
               else "FINDING ON THE CORRECT SERVER" if not row.expected
               else "TOO LONG" if not short else "UNEXPECTED PROPERTY")
    reproduced = ""
    if args.replay and done.story_path is not None:
        again = replay(load_story(done.story_path),
                       ReplayConfig(target=row.target, report_dir=report_dir / "replay",
                                    toxiproxy=toxiproxy))
        reproduced = "  replay: " + ("reproduced" if again.reproduced else "NOT reproduced")
    return (f"{row.name:<24}{'yes':>6}{story.examples:>9}{story.seconds:>8.1f}s"
            f"{story.operations:>7}  {','.join(story.properties):<12}{total:>8.1f}s  "
            f"{verdict}{reproduced}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-examples", type=int,
                        default=get_profile().explore_max_examples)
    parser.add_argument("--flaw", action="append", default=[], metavar="NAME")
    parser.add_argument("--postgres", action="store_true",
                        help="add the correct server on PostgreSQL")
    parser.add_argument("--no-correct", action="store_true", help="only the flaws")
    parser.add_argument("--replay", action="store_true",
                        help="replay every saved story and say if it reproduced")
    args = parser.parse_args()

    print(f"explorer bench: seed {args.seed}, budget {args.max_examples} examples per row\n")
    print(f"{'row':<24}{'found':>6}{'examples':>9}{'seconds':>9}{'steps':>7}  "
          f"{'properties':<12}{'total':>9}  verdict")
    started = time.monotonic()
    with ExitStack() as stack:
        toxiproxy = stack.enter_context(start_toxiproxy())
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        rows: list[Row] = []
        if not args.no_correct:
            rows.append(Row("correct (sqlite)", reference_target(store=None, flaw=None), ()))
            if args.postgres:
                dsn = stack.enter_context(start_postgres()).create_database("idem_explore")
                rows.append(Row("correct (postgresql)",
                                reference_target(store=dsn, flaw=None), ()))
        for name in args.flaw or list(FLAWS):
            rows.append(Row(name, reference_target(store=None, flaw=name),
                            FLAWS[name].properties))
        for row in rows:
            print(_explore(row, args, toxiproxy, scratch), flush=True)
    print(f"\nwhole bench: {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()

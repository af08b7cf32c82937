"""Which flaws `run` and `explore` catch, which they miss, and how many false findings they
report on correct services: the reference server's named flaws and the corpus of independent
services in tests/corpus/ (issue 13, "judge any target fairly").

Rows come from what exists: every flaw in ``reference_server.flaws.FLAWS``, and every target
file in ``tests/corpus/targets/*.toml`` whose start command runs ``-m MODULE``, with the flaws
that module lists in ``FLAWS`` (each started with ``--flaw NAME``).  Each target also gets a
row for its correct mode.  A flaw is caught when the run reports a finding; any finding on a
correct mode is a false finding.  An undecided run (``inconclusive``) is neither.

`explore` draws ``--max-examples`` (default: the profile's budget, 60) with no shrinking time,
since only "found or not" counts here.  Every correct mode runs ``--seeds`` times (``--seed``,
then random seeds, a row each: issue 23 asks for no false finding over 10 seeds of explore,
issue 24 over 5 of run); a flaw runs once, with ``--seed``.  With both fronts the totals end
with the flaws ``run`` catches that ``explore`` misses (issue 23: none).

The queue consumers of ``tests/consumer_corpus/targets/*.toml`` are rows too, with the flaws
``tests/consumer_corpus/flaws.toml`` names, on both fronts (one shared RabbitMQ): `run` plays
the consumer scenarios, `explore` draws consumer stories (harness/explore/consumer); a correct
consumer runs with at least ``CONSUMER_SEEDS`` seeds (a row each).

Run: `.venv/bin/python -P bench/detection.py [--only reference|corpus|consumer-corpus]
[--target NAME ...]
[--front run|explore] [--max-examples N] [--seed N] [--seeds N] [--postgres] [--correct-only]
[--flaws-only] [--first-only] [--busy N]`; ``--busy N`` runs the sweep beside N busy processes
per core (issue 38: verdicts on a loaded machine), stopped when it ends; ``--first-only``
explores a row until its first failure (a single flaw's row asks only whether it is caught).
`--only consumer-corpus --front explore` explores each corpus consumer.

`--multi [SEED ...]` (issue 37) explores each corpus service and consumer started with several
flaws at once (``tests/corpus/multiflaw.toml``, ``tests/consumer_corpus/flaws.toml``'s
``[[combined]]``) at each SEED (default 1 and 2), once per seed (at ``--max-examples``, or the
budget the table gives the mode), and prints per mode which flaws were reported (each by a kept
failure of its own naming one of its properties) and which were missed, with the kinds of every
failure kept; then every correct corpus service and consumer, explored at ``--seeds`` seeds as
``--correct-only --front explore`` does. `--only` and `--target` pick the modes and services.
For example `bench/detection.py --multi 1 2 --seeds 5 --max-examples 20 --shrink-time 5`.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness._errors import HarnessError
from harness._interrupts import Interrupted, main_until_interrupted
from harness._outcomes import RunResult
from harness._profiles import get_profile
from harness._runner import RunConfig, run_scenarios
from harness._target import Target
from harness.consumer import ConsumerScenario, ConsumerTarget, run_target, shared_broker
from harness.explore import ExploreConfig, explore
from harness.reports import ReportDirectory
from harness.services._postgres import start_postgres
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.targets._loader import load_target
from harness.targets._reference import reference_target
from reference_server.flaws import FLAWS
from scenarios import CATALOG

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "targets"
CONSUMER_CORPUS = ROOT / "tests" / "consumer_corpus"
#: The corpus services started with several flaws at once (issue 37).
MULTIFLAW = ROOT / "tests" / "corpus" / "multiflaw.toml"
MULTI_SEEDS = (1, 2)
#: The fewest seeds a correct corpus consumer runs with (issue 25: five runs each).
CONSUMER_SEEDS = 5
FRONTS = ("run", "explore")


@dataclass(frozen=True)
class Row:
    """One target in one mode: ``flaw`` None is the correct mode."""

    suite: str
    name: str
    target: Target
    flaw: str | None


def _corpus_flaws(target: Target) -> tuple[str, ...]:
    """The flaws a corpus service offers: the literal ``FLAWS`` of the module its command runs,
    read from its source (``tests`` is not an installed package, and ``-P`` keeps the checkout
    off the path)."""
    command = target.start.command if target.start else []
    if "-m" not in command:
        return ()
    source = ROOT.joinpath(*command[command.index("-m") + 1].split(".")).with_suffix(".py")
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "FLAWS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    return ()


def _consumer_rows(names: list[str]) -> Iterator[Row]:
    flaws = tomllib.loads((CONSUMER_CORPUS / "flaws.toml").read_text(encoding="utf-8"))["flaw"]
    for path in sorted((CONSUMER_CORPUS / "targets").glob("*.toml")):
        target = load_target(path)
        if names and target.name not in names and path.stem not in names:
            continue
        yield Row("consumers", target.name, target, None)
        for flaw in (f["name"] for f in flaws if f["consumer"] == path.stem):
            yield Row("consumers", target.name, target.with_start_args(["--flaw", flaw]), flaw)


def rows(only: str | None, names: list[str], dsn: str | None = None) -> Iterator[Row]:
    """The reference server (and on PostgreSQL, given ``dsn``) and each corpus service,
    correct first, then each flaw."""
    if only in (None, "reference"):
        reference = [Row("reference", "reference-server",
                         reference_target(store=None, flaw=None), None)]
        if dsn is not None:
            reference.append(Row("reference", "reference-server (postgresql)",
                                 reference_target(store=dsn, flaw=None), None))
        reference += [Row("reference", "reference-server", reference_target(store=None, flaw=f),
                          f) for f in FLAWS]
        yield from (r for r in reference if not names or r.name in names)
    if only in (None, "corpus"):
        for path in sorted(CORPUS.glob("*.toml")):
            target = load_target(path)
            if names and target.name not in names and path.stem not in names:
                continue
            yield Row("corpus", target.name, target, None)
            for flaw in _corpus_flaws(target):
                yield Row("corpus", target.name, target.with_start_args(["--flaw", flaw]), flaw)
    if only in (None, "consumer-corpus"):
        yield from _consumer_rows(names)


@dataclass(frozen=True)
class Mode:
    """A corpus service or consumer with several flaws at once, each with the properties of
    which one must be named by a kept failure of its own."""

    suite: str
    name: str
    target: Target
    flaws: Mapping[str, tuple[str, ...]]
    max_examples: int | None = None  # the table's budget for it, where it gives one


def multi_modes(only: str | None, names: list[str]) -> Iterator[Mode]:
    """The multi-flaw modes of the corpus's and the consumer corpus's tables."""
    tables = [("corpus", MULTIFLAW, "mode", "service", CORPUS),
              ("consumers", CONSUMER_CORPUS / "flaws.toml", "combined", "consumer",
               CONSUMER_CORPUS / "targets")]
    for suite, table, section, field, targets in tables:
        if only not in (None, "corpus" if suite == "corpus" else "consumer-corpus"):
            continue
        for mode in tomllib.loads(table.read_text(encoding="utf-8")).get(section, []):
            target = load_target(targets / f"{mode[field]}.toml")
            if names and target.name not in names and mode[field] not in names:
                continue
            flaws = {flaw: tuple(properties) for flaw, properties in mode["flaws"].items()}
            start = [arg for flaw in flaws for arg in ("--flaw", flaw)]
            yield Mode(suite, mode[field], target.with_start_args(start), flaws,
                       mode.get("max_examples"))


def matched(flaws: Mapping[str, Collection[str]],
            failures: Sequence[Collection[str]]) -> dict[str, int]:
    """Each flaw matched to a failure of its own (its index; a failure given as the
    properties its story names) naming one of the flaw's properties, as many as can be (as
    tests/corpus/multiflaw.py matches them: two flaws told as one failure are one flaw)."""
    owner: dict[int, str] = {}

    def place(flaw: str, seen: set[int]) -> bool:
        for index, properties in enumerate(failures):
            if index in seen or not set(flaws[flaw]) & set(properties):
                continue
            seen.add(index)
            if index not in owner or place(owner[index], seen):
                owner[index] = flaw
                return True
        return False

    for flaw in flaws:
        place(flaw, set())
    return {flaw: index for index, flaw in owner.items()}


def _failures(result: RunResult) -> list[dict[str, Any]]:
    explored = result.extra.get("explore")
    failures = explored.get("failures", []) if isinstance(explored, dict) else []
    return [f for f in failures if isinstance(f, dict)]


def play_modes(args: argparse.Namespace, toxiproxy: ToxiproxyServer, scratch: Path) -> None:
    """Each multi-flaw mode explored once per seed: which flaws were reported, which
    missed, and the kinds of every failure kept."""
    seeds = args.multi or list(MULTI_SEEDS)
    print(f"several flaws at once: one exploration per seed ({', '.join(map(str, seeds))}), "
          f"{args.max_examples} examples\n")
    runs = reported = 0
    missed: list[str] = []
    beyond: list[str] = []
    for mode in multi_modes(args.only, args.target):
        for seed in seeds:
            clock = time.monotonic()
            row = Row(mode.suite, mode.name, mode.target, "+".join(mode.flaws))
            try:
                budget = argparse.Namespace(**{
                    **vars(args), "max_examples": mode.max_examples or args.max_examples})
                result: RunResult | None = _judged("explore", row, seed, budget, toxiproxy,
                                                   scratch)
            except HarnessError as exc:
                print(f"  {mode.name} {row.flaw}: {exc}", flush=True)
                result = None
            if result is not None and result.verdict == "incomplete":
                raise Interrupted(signal.Signals[result.stopped_by or "SIGINT"])
            failures = _failures(result) if result is not None else []
            found = matched(mode.flaws, [f.get("properties", []) for f in failures])
            lost = [flaw for flaw in mode.flaws if flaw not in found]
            runs += 1
            reported += not lost
            missed += [f"{mode.name} {flaw} (seed {seed})" for flaw in lost]
            if len(failures) > len(found):
                beyond.append(f"{mode.name} seed {seed}: {len(failures)} failures for "
                              f"{len(mode.flaws)} flaws")
            shown = ", ".join(f"{flaw} ({'/'.join(mode.flaws[flaw])})" for flaw in found)
            print(f"{mode.name[:27]:<28}seed {seed:<4} reported {shown or 'none'}; missed "
                  f"{', '.join(lost) or 'none'}  {time.monotonic() - clock:.0f}s", flush=True)
            for failure in failures:
                print(f"{'':<34}kept: {', '.join(failure.get('kinds', []))} (properties "
                      f"{', '.join(failure.get('properties', []))})", flush=True)
    print(f"\nmodes with every flaw reported: {reported} of {runs} explorations")
    print("  flaws missed: " + ("; ".join(missed) or "none"))
    print("  more failures kept than flaws (a flaw told as several?): "
          + ("; ".join(beyond) or "none") + "\n")


def _judged(front: str, row: Row, seed: int, args: argparse.Namespace,
            toxiproxy: ToxiproxyServer, scratch: Path) -> RunResult:
    """One row's run; with ``--keep``, its whole report (results.json, the page, the history)
    is written, so a false finding or an undecided row can be read afterwards."""
    report_dir = scratch / f"{row.name}-{row.flaw or 'correct'}-{front}-{seed}"
    handlers = [ReportDirectory(report_dir)] if args.keep else []
    if isinstance(row.target, ConsumerTarget) and front == "run":
        return run_target(RunConfig(target=row.target, report_dir=report_dir, seed=seed,
                                    toxiproxy=toxiproxy,
                                    scenarios=[s for s in CATALOG.values()
                                               if isinstance(s, ConsumerScenario)]), handlers)
    if front == "run":
        return run_scenarios(RunConfig(target=row.target, scenarios=list(CATALOG.values()),
                                       report_dir=report_dir, seed=seed,
                                       toxiproxy=toxiproxy), handlers)
    return explore(ExploreConfig(target=row.target, max_examples=args.max_examples,
                                 seed=seed, report_dir=report_dir, toxiproxy=toxiproxy,
                                 shrink_seconds=args.shrink_time,
                                 first_only=args.first_only),
                   handlers).result


def outcome(row: Row, result: RunResult | None) -> tuple[str, str]:
    """``caught``, ``missed``, ``false``, ``clean``, ``undecided`` or ``error``, and what
    broke (the properties of its findings)."""
    if result is None:
        return "error", ""
    found = sorted({f.property for f in result.findings})
    if row.flaw is None:
        return ("false" if found else "clean" if result.verdict == "pass" else "undecided",
                ",".join(found))
    return ("caught" if found else "missed" if result.verdict == "pass" else "undecided",
            ",".join(found))


#: Spins, looking up now and then whether the bench that started it is still its parent.
SPIN = ("import os\n"
        "parent = os.getppid()\n"
        "while os.getppid() == parent:\n"
        "    for _ in range(200_000):\n"
        "        pass\n")


@contextmanager
def busy(per_core: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``per_core`` spinning processes per core for the block (none for 0); each is stopped
    (SIGTERM, then SIGKILL) when it ends, whatever ends it."""
    count = per_core * (os.cpu_count() or 1)
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(count)]
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.terminate()
        for spinner in spinners:
            try:
                spinner.wait(timeout=5)
            except subprocess.TimeoutExpired:
                spinner.kill()
                spinner.wait()


def seeds_for(row: Row, args: argparse.Namespace, draw: random.Random) -> list[int]:
    """The seeds a row runs with: ``--seed`` for a flaw (caught or not); for a correct mode,
    ``--seed`` then random ones, ``--seeds`` in all (a false finding may need another seed)."""
    if row.flaw is not None:
        return [args.seed]
    runs = max(args.seeds, CONSUMER_SEEDS) if isinstance(row.target, ConsumerTarget) else args.seeds
    return [args.seed, *(draw.randrange(2**32) for _ in range(runs - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["reference", "corpus", "consumer-corpus"])
    parser.add_argument("--target", action="append", default=[], metavar="NAME",
                        help="corpus targets by name or file stem (default: all)")
    parser.add_argument("--front", action="append", choices=FRONTS, default=[])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seeds", type=int, default=1, metavar="N",
                        help="runs per correct mode: --seed, then N-1 random seeds, a row each")
    parser.add_argument("--max-examples", type=int,
                        default=get_profile("dev").explore_max_examples)
    parser.add_argument("--shrink-time", type=float, default=0.0, metavar="SECONDS")
    parser.add_argument("--postgres", action="store_true",
                        help="add the correct reference server on PostgreSQL")
    parser.add_argument("--correct-only", action="store_true",
                        help="only the correct modes (a sweep of seeds for false findings)")
    parser.add_argument("--flaws-only", action="store_true",
                        help="only the flawed modes (which flaws each front catches)")
    parser.add_argument("--first-only", action="store_true",
                        help="explore until the first failure kept (caught or not is all a "
                             "single flaw's row asks)")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="start N busy processes per core beside the sweep (a loaded "
                             "machine, issue 38) and stop them after")
    parser.add_argument("--multi", type=int, nargs="*", default=None, metavar="SEED",
                        help="explore each corpus service and consumer started with several "
                             "flaws at once at these seeds (default 1 2), then the correct "
                             "ones at --seeds seeds")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="keep every row's report directory under DIR (default: a "
                             "temporary directory, removed at the end)")
    args = parser.parse_args()
    if args.multi is not None:  # then the correct modes, explored
        args.front, args.correct_only = ["explore"], True
    fronts = tuple(args.front) or FRONTS

    if args.busy < 0:
        parser.error("--busy N: N is how many busy processes per core, 0 or more")
    spinners = args.busy * (os.cpu_count() or 1)
    load = (f", {args.busy} busy process(es) per core beside it ({spinners} in all)"
            if args.busy else "")
    print(f"detection bench: seed {args.seed}, {args.seeds} seed(s) per correct mode, explore "
          f"budget {args.max_examples} examples{load}\n")
    tally: dict[str, Counter[str]] = {front: Counter() for front in fronts}
    caught_by: dict[str, set[tuple[str, str]]] = {front: set() for front in fronts}
    started = time.monotonic()
    draw = random.Random()
    with ExitStack() as stack:
        toxiproxy = stack.enter_context(start_toxiproxy())
        scratch = args.keep or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        dsn = (stack.enter_context(start_postgres()).create_database("idem_detection")
               if args.postgres else None)
        if args.only in (None, "consumer-corpus"):
            stack.enter_context(shared_broker())  # one RabbitMQ for every consumer run
        stack.enter_context(busy(args.busy))  # once the services are up; stopped first
        if args.multi is not None:
            play_modes(args, toxiproxy, scratch)
        print(f"{'target':<28}{'mode':<22}{'seed':>11}  " + "".join(f"{f:<26}" for f in fronts))
        for row in rows(args.only, args.target, dsn):
            if ((args.correct_only and row.flaw is not None)
                    or (args.flaws_only and row.flaw is None)
                    or (args.multi is not None and row.suite == "reference")):
                continue
            for seed in seeds_for(row, args, draw):
                cells = []
                for front in fronts:
                    clock = time.monotonic()
                    try:
                        result: RunResult | None = _judged(front, row, seed, args, toxiproxy,
                                                           scratch)
                    except HarnessError as exc:
                        print(f"  {row.name} {row.flaw or 'correct'} {front}: {exc}", flush=True)
                        result = None
                    if result is not None and result.verdict == "incomplete":
                        raise Interrupted(signal.Signals[result.stopped_by or "SIGINT"])
                    verdict, found = outcome(row, result)
                    tally[front][verdict] += 1
                    if verdict == "caught":
                        caught_by[front].add((row.name, row.flaw or ""))
                    cells.append(f"{verdict} {found}".strip()[:18]
                                 + f" {time.monotonic() - clock:.0f}s")
                print(f"{row.name[:27]:<28}{(row.flaw or 'correct')[:21]:<22}{seed:>11}  "
                      + "".join(f"{c:<26}" for c in cells), flush=True)
    print("\ntotals (flaws: caught / missed; correct modes: false findings / clean; "
          "undecided; errors)")
    for front, counts in tally.items():
        print(f"  {front:<8} caught {counts['caught']}  missed {counts['missed']}  "
              f"false {counts['false']}  clean {counts['clean']}  "
              f"undecided {counts['undecided']}  error {counts['error']}")
    if set(fronts) == set(FRONTS):
        behind = sorted(caught_by["run"] - caught_by["explore"])
        print("  flaws run catches and explore misses: "
              + (", ".join(f"{name} {flaw}" for name, flaw in behind) or "none"))
    print(f"\nwhole bench: {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    # SIGINT and SIGTERM stop the row in progress, which reports itself incomplete (an
    # exploration stopped by SystemExit instead had Hypothesis print a FlakyFailure); the
    # services the bench started are stopped on the way out.
    main_until_interrupted(main, "detection bench")

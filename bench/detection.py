"""Which flaws `run` and `explore` catch, which they miss, and how many false findings they
report on correct services: the reference server's named flaws and the corpus of independent
services in tests/corpus/ (issue 13, "judge any target fairly").

Rows come from what exists: every flaw in ``reference_server.flaws.FLAWS``, every target
file in ``tests/corpus/targets/*.toml`` whose start command runs ``-m MODULE``, with the flaws
that module lists in ``FLAWS`` (each started with ``--flaw NAME``), and every queue consumer of
``tests/consumer_corpus/targets/*.toml`` with the flaws ``tests/consumer_corpus/flaws.toml``
names.  Each target also gets a row for its correct mode; a correct consumer is run
``CONSUMER_REPEATS`` times with consecutive seeds (a false finding may show in one run of five),
and the consumer rows have the `run` front only.  A flaw is caught when the run reports a
finding; any finding on a correct mode is a false finding.  An undecided run (``inconclusive``)
is neither.

The default budget is modest (a few minutes per dozen rows): `explore` draws
``--max-examples`` (default 6) with a fixed seed and no shrinking time, since only "found or
not" counts here.  Give more with ``--max-examples 60 --shrink-time 60``.

Run: `.venv/bin/python -P bench/detection.py [--only reference|corpus|consumer-corpus]
[--target NAME ...]
[--front run|explore] [--max-examples N] [--seed N]`.
"""

from __future__ import annotations

import argparse
import ast
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from harness._errors import HarnessError
from harness._outcomes import RunResult
from harness._reference import reference_target
from harness._runner import RunConfig, run_scenarios
from harness._target import Target, load_target
from harness._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.consumer import ConsumerScenario, ConsumerTarget, run_target, shared_broker
from harness.explore import ExploreConfig, explore
from reference_server.flaws import FLAWS
from scenarios import CATALOG

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "targets"
CONSUMER_CORPUS = ROOT / "tests" / "consumer_corpus"
FRONTS = ("run", "explore")
#: Runs of each correct corpus consumer, one seed after another.
CONSUMER_REPEATS = 5


@dataclass(frozen=True)
class Row:
    """One target in one mode: ``flaw`` None is the correct mode."""

    suite: str
    name: str
    target: Target
    flaw: str | None
    repeats: int = 1


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
        yield Row("consumers", target.name, target, None, CONSUMER_REPEATS)
        for flaw in (f["name"] for f in flaws if f["consumer"] == path.stem):
            yield Row("consumers", target.name, target.with_start_args(["--flaw", flaw]), flaw)


def rows(only: str | None, names: list[str]) -> Iterator[Row]:
    """The reference server, each corpus service and each corpus consumer, correct first, then
    each flaw."""
    if only in (None, "reference"):
        yield Row("reference", "reference-server", reference_target(store=None, flaw=None), None)
        for flaw in FLAWS:
            yield Row("reference", "reference-server",
                      reference_target(store=None, flaw=flaw), flaw)
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


def _judged(front: str, row: Row, args: argparse.Namespace, toxiproxy: ToxiproxyServer,
            scratch: Path, *, seed: int) -> RunResult:
    report_dir = scratch / f"{row.name}-{row.flaw or 'correct'}-{front}-{seed}"
    if isinstance(row.target, ConsumerTarget):
        return run_target(RunConfig(target=row.target, report_dir=report_dir, seed=seed,
                                    toxiproxy=toxiproxy,
                                    scenarios=[s for s in CATALOG.values()
                                               if isinstance(s, ConsumerScenario)]))
    if front == "run":
        return run_scenarios(RunConfig(target=row.target, scenarios=list(CATALOG.values()),
                                       report_dir=report_dir, seed=seed,
                                       toxiproxy=toxiproxy))
    return explore(ExploreConfig(target=row.target, max_examples=args.max_examples,
                                 seed=seed, report_dir=report_dir, toxiproxy=toxiproxy,
                                 shrink_seconds=args.shrink_time)).result


def outcome(row: Row, results: list[RunResult | None]) -> tuple[str, str]:
    """``caught``, ``missed``, ``false``, ``clean``, ``undecided`` or ``error``, and what
    broke (the properties of its findings).  A row run several times counts once: a finding in
    any run counts, and it is clean only when every run passed."""
    if not results or any(r is None for r in results):
        return "error", ""
    done = [r for r in results if r is not None]
    found = sorted({f.property for r in done for f in r.findings})
    passed = all(r.verdict == "pass" for r in done)
    if row.flaw is None:
        return ("false" if found else "clean" if passed else "undecided", ",".join(found))
    return ("caught" if found else "missed" if passed else "undecided", ",".join(found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["reference", "corpus", "consumer-corpus"])
    parser.add_argument("--target", action="append", default=[], metavar="NAME",
                        help="corpus targets by name or file stem (default: all)")
    parser.add_argument("--front", action="append", choices=FRONTS, default=[])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-examples", type=int, default=6)
    parser.add_argument("--shrink-time", type=float, default=0.0, metavar="SECONDS")
    args = parser.parse_args()
    fronts = tuple(args.front) or FRONTS

    print(f"detection bench: seed {args.seed}, explore budget {args.max_examples} examples\n")
    print(f"{'target':<28}{'mode':<22}" + "".join(f"{f:<26}" for f in fronts))
    tally: dict[str, Counter[str]] = {front: Counter() for front in fronts}
    started = time.monotonic()
    with ExitStack() as stack:
        toxiproxy = stack.enter_context(start_toxiproxy())
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.only in (None, "consumer-corpus"):
            stack.enter_context(shared_broker())  # one RabbitMQ for every consumer run
        for row in rows(args.only, args.target):
            cells = []
            for front in fronts:
                if isinstance(row.target, ConsumerTarget) and front != "run":
                    cells.append("n/a (run only)")
                    continue
                clock = time.monotonic()
                results: list[RunResult | None] = []
                for seed in range(args.seed, args.seed + row.repeats):
                    try:
                        results.append(_judged(front, row, args, toxiproxy, scratch, seed=seed))
                    except HarnessError as exc:
                        print(f"  {row.name} {row.flaw or 'correct'} {front}: {exc}",
                              flush=True)
                        results.append(None)
                verdict, found = outcome(row, results)
                if row.repeats > 1:
                    found = f"{found} x{row.repeats}".strip()
                tally[front][verdict] += 1
                cells.append(f"{verdict} {found}".strip()[:18]
                             + f" {time.monotonic() - clock:.0f}s")
            print(f"{row.name[:27]:<28}{(row.flaw or 'correct')[:21]:<22}"
                  + "".join(f"{c:<26}" for c in cells), flush=True)
    print("\ntotals (flaws: caught / missed; correct modes: false findings / clean; "
          "undecided; errors)")
    for front, counts in tally.items():
        print(f"  {front:<8} caught {counts['caught']}  missed {counts['missed']}  "
              f"false {counts['false']}  clean {counts['clean']}  "
              f"undecided {counts['undecided']}  error {counts['error']}")
    print(f"\nwhole bench: {time.monotonic() - started:.1f}s")


if __name__ == "__main__":
    main()

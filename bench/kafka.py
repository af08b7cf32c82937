"""Kafka consumers through the harness, measured (issue 40): the catalog's time beside
RabbitMQ's, the reference Kafka consumer's flaws, and the Kafka corpus at several seeds.

    .venv/bin/python bench/kafka.py catalog            # the whole catalog on each broker
    .venv/bin/python bench/kafka.py reference          # each reference flaw: run and explore
    .venv/bin/python bench/kafka.py corpus             # each corpus flaw at two seeds, each
                                                       # correct consumer at five
    .venv/bin/python bench/kafka.py corpus --only franz_inbox --seeds 3 --correct-seeds 6 7

``catalog`` runs the correct reference consumer through every scenario its broker can play,
first on Kafka and then on RabbitMQ, one after the other in this process, each run starting
its own broker and Toxiproxy and stopping them (their start is in the time): the figures and
their ratio.

``reference`` and ``corpus`` play each row as a process of its own
(``python -m tests.kafka_corpus.play``), each on a throwaway broker, ``--jobs`` at once
(default 2: most of a consumer run is waiting).  A flaw's row is caught when ``run`` (the whole
catalog for a reference flaw, the scenario ``flaws.toml`` names for a corpus flaw) fails with
one of the flaw's properties, and when ``explore --first-only`` (budget ``--budget``, 60) does;
its examples are those the exploration drew until the failure.  A correct row is clean when
``run`` over the catalog and a seeded exploration of ``--correct-examples`` examples beside the
opening find nothing; a scenario whose moment did not come (its precondition) is undecided, said
in the row, and counted apart.  Exit 1 when any row is not as expected.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness._outcomes import RunResult  # noqa: E402
from harness._runner import RunConfig, run_scenarios  # noqa: E402
from harness.consumer import reference_consumer_target  # noqa: E402
from harness.services._processes import stop_children_on_sigterm  # noqa: E402
from reference_server.consumer.flaws import KAFKA_CONSUMER_FLAWS  # noqa: E402
from scenarios import default_scenarios  # noqa: E402
from tests.kafka_corpus.support import CONSUMERS, FLAWS  # noqa: E402

#: One play: (target, flaw or None, "run" or "explore", seed).
Job = tuple[str, str | None, str, int]
#: A row's timeout: a corpus catalog takes about 90 s here, an exploration of 60 examples more.
PLAY_TIMEOUT = 1200


@dataclass(frozen=True)
class Played:
    job: Job
    verdict: str
    properties: frozenset[str]
    examples: int | None
    seconds: float
    why: str


def _properties(results: dict[str, Any]) -> frozenset[str]:
    return frozenset(f["property"] for s in results["scenarios"] for f in s["findings"])


def _play(job: Job, base: Path, *, scenario: str | None, budget: int,
          first_only: bool) -> Played:
    target, flaw, how, seed = job
    report = base / f"{target}-{flaw or 'correct'}-{how}-{seed}"
    command = [sys.executable, "-m", "tests.kafka_corpus.play", target, str(report),
               "--seed", str(seed)]
    command += ["--flaw", flaw] if flaw else []
    command += ["--scenario", scenario] if scenario and how == "run" else []
    command += ["--explore", str(budget)] if how == "explore" else []
    command += ["--first-only"] if first_only and how == "explore" else []
    started = time.monotonic()
    try:
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                              timeout=PLAY_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return Played(job, "timeout", frozenset(), None, time.monotonic() - started,
                      f"no result in {PLAY_TIMEOUT} s")
    seconds = time.monotonic() - started
    try:
        results = json.loads((report / "results.json").read_text())
    except (OSError, ValueError):
        return Played(job, "error", frozenset(), None, seconds,
                      (done.stderr or done.stdout).strip().splitlines()[-1:][0]
                      if (done.stderr or done.stdout).strip() else f"exit {done.returncode}")
    numbers = results.get("extra", {}).get("explore", {})
    examples = (numbers.get("examples_to_failure") if flaw else numbers.get("examples"))
    undecided = [f"{s['name']}: {s.get('reason') or s.get('unknown_reasons')}"
                 for s in results["scenarios"] if s["verdict"] not in ("pass", "fail", "n/a")]
    return Played(job, results["verdict"], _properties(results), examples, seconds,
                  "; ".join(undecided)[:160])


def _expected(played: Played, properties: Sequence[str]) -> bool:
    """A flaw: caught, as one of its properties.  A correct consumer: clean, no finding; a
    scenario whose moment did not come is undecided (said in the row), never a finding."""
    if played.job[1] is None:
        return played.verdict in ("pass", "inconclusive") and not played.properties
    return played.verdict == "fail" and bool(played.properties & set(properties))


def _sweep(jobs: list[Job], *, scenario_of: dict[tuple[str, str], str], budget: int,
           correct_examples: int, at_once: int,
           expected: dict[tuple[str, str], Sequence[str]]) -> list[tuple[Played, bool]]:
    rows: list[tuple[Played, bool]] = []
    print(f"{'target':<18}{'flaw':<26}{'how':<9}{'seed':>5}  {'verdict':<9}{'properties':<12}"
          f"{'examples':>9}{'seconds':>9}  as expected")
    with tempfile.TemporaryDirectory(prefix="idem-kafka-bench-") as scratch, \
            ThreadPoolExecutor(at_once) as pool:
        def one(job: Job) -> Played:
            target, flaw = job[0], job[1]
            return _play(job, Path(scratch), scenario=scenario_of.get((target, flaw or "")),
                         budget=budget if flaw else correct_examples,
                         first_only=flaw is not None)

        for played in pool.map(one, jobs):
            target, flaw, how, seed = played.job
            ok = _expected(played, expected.get((target, flaw or ""), ()))
            rows.append((played, ok))
            examples = "" if played.examples is None else str(played.examples)
            print(f"{target:<18}{flaw or '(correct)':<26}{how:<9}{seed:>5}  "
                  f"{played.verdict:<9}{','.join(sorted(played.properties)) or '-':<12}"
                  f"{examples:>9}{played.seconds:>9.1f}  {'yes' if ok else 'NO'}"
                  + (f"  (undecided: {played.why})" if played.why else ""), flush=True)
    return rows


def _summary(rows: list[tuple[Played, bool]]) -> int:
    missed = [p for p, ok in rows if not ok]
    flawed = [p for p, _ in rows if p.job[1] is not None and p.job[2] == "explore"
              and p.examples is not None]
    most = max((p.examples or 0 for p in flawed), default=0)
    undecided = sum(1 for p, _ in rows if p.verdict == "inconclusive")
    print(f"\n{len(rows) - len(missed)} of {len(rows)} rows as expected ({undecided} clean with "
          f"a scenario undecided); the most examples an exploration needed to find a flaw: "
          f"{most}")
    return 1 if missed else 0


def catalog() -> int:
    """The whole catalog on the correct reference consumer, Kafka then RabbitMQ, each with its
    own broker and Toxiproxy started inside the time."""
    times: dict[str, tuple[float, RunResult]] = {}
    with tempfile.TemporaryDirectory(prefix="idem-kafka-bench-") as scratch:
        for broker in ("kafka", "rabbitmq"):
            target = reference_consumer_target(store=None, flaw=None, broker=broker)
            started = time.monotonic()
            result = run_scenarios(RunConfig(target=target, scenarios=default_scenarios(target),
                                             report_dir=Path(scratch) / broker, seed=1))
            times[broker] = (time.monotonic() - started, result)
    bad = [f"{broker}: {o.name} {o.verdict}" for broker, (_, result) in times.items()
           for o in result.outcomes if o.verdict not in ("pass", "n/a")]
    print(f"{'scenario':<32}{'Kafka s':>9}{'RabbitMQ s':>12}")
    seconds = {broker: {o.name: o.seconds for o in result.outcomes if o.verdict != "n/a"}
               for broker, (_, result) in times.items()}
    for name in dict.fromkeys([*seconds["kafka"], *seconds["rabbitmq"]]):
        kafka, rabbit = seconds["kafka"].get(name), seconds["rabbitmq"].get(name)
        print(f"{name:<32}{'' if kafka is None else f'{kafka:.1f}':>9}"
              f"{'' if rabbit is None else f'{rabbit:.1f}':>12}")
    kafka_total, rabbit_total = times["kafka"][0], times["rabbitmq"][0]
    print(f"\nwhole catalog, broker and Toxiproxy start included:\n"
          f"  Kafka     {len(seconds['kafka']):>2} scenarios  {kafka_total:6.1f} s\n"
          f"  RabbitMQ  {len(seconds['rabbitmq']):>2} scenarios  {rabbit_total:6.1f} s\n"
          f"  ratio Kafka / RabbitMQ: {kafka_total / rabbit_total:.2f}")
    if bad:
        print("the correct consumer did not hold (not a benchmark): " + "; ".join(bad))
        return 1
    return 0


def reference(args: argparse.Namespace) -> int:
    names = args.only or list(KAFKA_CONSUMER_FLAWS)
    jobs: list[Job] = [("reference", None, "run", args.seeds[0])]
    jobs += [("reference", name, how, seed) for seed in args.seeds for name in names
             for how in ("run", "explore")]
    expected: dict[tuple[str, str], Sequence[str]] = {
        ("reference", name): KAFKA_CONSUMER_FLAWS[name].properties for name in names}
    return _summary(_sweep(jobs, scenario_of={}, budget=args.budget, correct_examples=0,
                           at_once=args.jobs, expected=expected))


def corpus(args: argparse.Namespace) -> int:
    consumers = args.only or list(CONSUMERS)
    flaws = [f for f in FLAWS if f.consumer in consumers]
    jobs: list[Job] = [(f.consumer, f.name, how, seed) for seed in args.seeds for f in flaws
                       for how in ("run", "explore")]
    jobs += [(name, None, how, seed) for seed in args.correct_seeds for name in consumers
             for how in ("run", "explore")]
    return _summary(_sweep(
        jobs, scenario_of={(f.consumer, f.name): f.scenario for f in flaws},
        budget=args.budget, correct_examples=args.correct_examples, at_once=args.jobs,
        expected={(f.consumer, f.name): f.properties for f in flaws}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["catalog", "reference", "corpus"])
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="reference: these flaws; corpus: these consumers")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2],
                        help="the seeds each flaw is run and explored at (default 1 2)")
    parser.add_argument("--correct-seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5],
                        help="corpus: the seeds each correct consumer is played at (default "
                             "1 to 5)")
    parser.add_argument("--budget", type=int, default=60,
                        help="examples an exploration may draw to find a flaw (default 60)")
    parser.add_argument("--correct-examples", type=int, default=4,
                        help="examples a correct consumer's exploration draws beside the "
                             "opening (default 4)")
    parser.add_argument("--jobs", type=int, default=2, help="plays at once (default 2)")
    args = parser.parse_args()
    stop_children_on_sigterm()  # a SIGTERM stops the brokers and consumers it started too
    started = time.monotonic()
    code = {"catalog": lambda: catalog(), "reference": lambda: reference(args),
            "corpus": lambda: corpus(args)}[args.what]()
    print(f"({time.monotonic() - started:.0f} s in all)")
    raise SystemExit(code)


if __name__ == "__main__":
    main()

"""Load figures: the harness's load generator beside bare Locust, then chaos off and on.

1. Generator speed (issue 17, part 3).  Against the same target (the correct reference server,
   one process on SQLite), through the same path (a Toxiproxy proxy in front of it, both runs),
   with the same users, the same charges (a fresh key and body each, from the target's template)
   and chaos off: bare Locust ``FastHttpUser`` sending them and recording nothing, then
   ``idem-harness load`` recording every attempt.  Printed: attempts per Locust CPU-second and per
   second for both, their ratios, and the goal (the harness at least 50% of bare Locust on both).
   The harness's load runs with its double submits and reuses off here, so both send the same
   requests.
2. Load figures against the correct server, chaos off and on, side by side, and where the CPU
   went (Locust, the servers, Toxiproxy, PostgreSQL, the rest): was the harness the bottleneck?

Both parts share one Toxiproxy; the second, with several servers, one PostgreSQL (IDEM_PG_DSN or
a throwaway cluster), whose CPU is read from its process tree.  "other" is whatever else ran on
the machine meanwhile: on a shared machine, read the figures with that in mind.

Run: `.venv/bin/python -P bench/load.py [--users 50] [--duration 30s] [--servers 2]
[--chaos storm] [--compare-users 20] [--compare-duration 15s] [--only compare|chaos]`
(-P: this directory must not shadow the packages of the checkout).
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil

from harness._durations import parse_duration
from harness._target import Target
from harness.http._deployment import Deployment
from harness.http.load import CHAOS_PROFILES, LoadConfig, LoadResult, run_load
from harness.http.load._plan import target_definition
from harness.services._postgres import start_postgres
from harness.services._processes import stop_children_on_sigterm
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy
from harness.targets._reference import reference_target

#: The goal of issue 17 part 3: the harness at least this share of bare FastHttpUser.
GOAL = 0.5

#: Bare Locust, in a process of its own (Locust is imported before anything else, as in the
#: harness's own Locust processes).  The charges are made by the harness's own code (``Customer``
#: for keys and bodies, ``RecordingClient.prepare`` for the bytes and headers), sent by
#: ``FastHttpUser`` and never recorded.  It prints one JSON line: requests, CPU seconds, wall.
BARE = r'''
import locust  # first of all: gevent must patch the standard library before ssl loads
import json, random, sys, time
import gevent
from locust import FastHttpUser, constant, task
from locust.env import Environment
from harness.http._client import RecordingClient
from harness._history import History
from harness._target import Target
from harness.http.load._charges import Customer

config = json.loads(sys.argv[1])
target = Target.model_validate(config["target"])
prepare = RecordingClient(target, History(), [config["url"]]).prepare
numbers = iter(range(10**9))


class Charges(FastHttpUser):
    host = config["url"]
    wait_time = constant(0)

    def on_start(self):
        number = next(numbers)
        self.customer = Customer(f"b{number}", number, config["run_id"], f"t{number % 4}",
                                 random.Random(f"{config['seed']}:{number}"))

    @task
    def charge(self):
        method, path, raw, headers = prepare(self.customer.next_request(target))
        self.client.request(method, path, data=raw, headers=headers, name=path)


environment = Environment(user_classes=[Charges])
runner = environment.create_local_runner()
cpu, wall = time.process_time(), time.monotonic()
runner.start(config["users"], spawn_rate=config["spawn_rate"])
gevent.sleep(config["duration"])
runner.stop()
total = environment.stats.total
print(json.dumps({"requests": total.num_requests, "failures": total.num_failures,
                  "cpu_seconds": time.process_time() - cpu,
                  "seconds": time.monotonic() - wall,
                  "p50_ms": total.get_response_time_percentile(0.5)}))
runner.quit()
'''


def bare_locust(target: Target, toxiproxy: ToxiproxyServer, scratch: Path, *, users: int,
                spawn_rate: float, duration: float, seed: int) -> dict[str, Any]:
    """Bare FastHttpUser against a fresh deployment of ``target`` behind ``toxiproxy``."""
    with Deployment(target, toxiproxy=toxiproxy, workdir=scratch / "bare-target") as deployment:
        config = {"url": deployment.instances[0].url, "target": target_definition(target),
                  "users": users, "spawn_rate": spawn_rate, "duration": duration, "seed": seed,
                  "run_id": deployment.run_id}
        done = subprocess.run([sys.executable, "-c", BARE, json.dumps(config)],
                              capture_output=True, text=True, timeout=duration + 120)
    if done.returncode != 0:
        raise SystemExit(f"bare Locust failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def compare(toxiproxy: ToxiproxyServer, scratch: Path, *, users: int, duration: float,
            seed: int) -> None:
    """Part 1: bare FastHttpUser and the harness, same target, path, users and charges."""
    target = reference_target(store=None, flaw=None)
    spawn_rate = float(users)
    bare = bare_locust(target, toxiproxy, scratch, users=users, spawn_rate=spawn_rate,
                       duration=duration, seed=seed)
    result = run_load(LoadConfig(
        target=target, users=users, spawn_rate=spawn_rate, duration=duration,
        report_dir=scratch / "compare", seed=seed, toxiproxy=toxiproxy,
        double_submit=0.0, reuse=0.0,
    ))
    figures, cpu = result.figures, result.cpu
    harness_rate = figures["requests"] / cpu.locust_seconds if cpu.locust_seconds else 0.0
    bare_rate = bare["requests"] / bare["cpu_seconds"] if bare["cpu_seconds"] else 0.0
    bare_throughput = bare["requests"] / bare["seconds"]
    harness_throughput = figures["requests_per_s"]
    print(f"generator speed: {users} users, {duration:.0f}s each, chaos off, the reference "
          "server (1 process, SQLite), both through a Toxiproxy proxy")
    rows = [
        ("attempts", f"{bare['requests']}", f"{figures['requests']} recorded"),
        ("Locust CPU s", f"{bare['cpu_seconds']:.1f}", f"{cpu.locust_seconds:.1f}"),
        ("attempts per Locust CPU-second", f"{bare_rate:.0f}", f"{harness_rate:.0f}"),
        ("attempts per second", f"{bare_throughput:.1f}", f"{harness_throughput:.1f}"),
        ("p50 ms", f"{bare['p50_ms']:.0f}",
         f"{figures['latency_ms']['first']['p50'] or 0:.0f}"),
    ]
    print(f"{'':<32}  {'bare FastHttpUser':>18}  {'idem-harness load':>18}")
    for name, left, right in rows:
        print(f"{name:<32}  {left:>18}  {right:>18}")
    for what, ours, theirs in (("per Locust CPU-second", harness_rate, bare_rate),
                               ("throughput", harness_throughput, bare_throughput)):
        ratio = ours / theirs if theirs else 0.0
        status = "met" if ratio >= GOAL else "NOT met"
        print(f"harness / bare {what}: {ratio:.0%} (goal at least {GOAL:.0%}: {status})")


def tree_seconds(pid: int) -> float:
    """CPU seconds of a process and all its children, the finished ones included."""
    try:
        parent = psutil.Process(pid)
        times = parent.cpu_times()
        total = times.user + times.system + times.children_user + times.children_system
        for child in parent.children(recursive=True):
            try:
                child_times = child.cpu_times()
            except psutil.Error:
                continue
            total += child_times.user + child_times.system
    except psutil.Error:
        return 0.0
    return float(total)


def listener_pid(port: int) -> int | None:
    """The process listening on a loopback TCP port (the postmaster, for PostgreSQL)."""
    for connection in psutil.net_connections(kind="tcp"):
        address = connection.laddr
        if connection.status == psutil.CONN_LISTEN and address and address[1] == port:
            return connection.pid
    return None


def measured(run: Callable[[], LoadResult], postmaster: int | None) -> tuple[LoadResult, float]:
    before = tree_seconds(postmaster) if postmaster else 0.0
    result = run()
    return result, (tree_seconds(postmaster) - before) if postmaster else 0.0


def rows(result: LoadResult, postgres: float) -> dict[str, str]:
    f, cpu = result.figures, result.cpu
    first, retry = f["latency_ms"]["first"], f["latency_ms"]["retry"]

    def ms(shares: dict[str, Any]) -> str:
        return " / ".join("-" if shares[p] is None else f"{shares[p]:.0f}"
                          for p in ("p50", "p95", "p99"))

    other = max(0.0, cpu.other_seconds - postgres)
    busy = cpu.machine_seconds / (cpu.wall_seconds * cpu.cores)
    return {
        "requests/s": f"{f['requests_per_s']:.1f}",
        "charges/s": f"{f['charges_per_s']:.1f}",
        "first attempt ms p50/p95/p99": ms(first),
        "retry ms p50/p95/p99": ms(retry),
        "retries per key (mean, max)": f"{f['retries_per_key']['mean']:.2f}, "
                                       f"{f['retries_per_key']['max']}",
        "double submits / reuses": f"{f['double_submits']} / {f['reuses']}",
        "409s / replays / give-ups": f"{f['status_409']} / {f['replays']} / {f['give_ups']}",
        "duplicates / lost outcomes": f"{f['duplicates']} / {f['lost_outcomes']}",
        "faults / crashes": f"{f['faults']} / {f['crashes']}",
        "CPU s Locust (busiest, of a core)": f"{cpu.locust_seconds:.1f} "
                                             f"({cpu.locust_busiest:.0%})",
        "CPU s servers": f"{cpu.servers_seconds:.1f}",
        "CPU s Toxiproxy": f"{cpu.toxiproxy_seconds:.1f}",
        "CPU s PostgreSQL": f"{postgres:.1f}",
        "CPU s other": f"{other:.1f}",
        "machine busy": f"{busy:.0%} of {cpu.cores} cores",
    }


def verdict(label: str, result: LoadResult, postgres: float) -> str:
    cpu = result.cpu
    target = cpu.servers_seconds + postgres + cpu.toxiproxy_seconds
    if cpu.harness_bound:
        return (f"{label}: the harness WAS the bottleneck: a Locust process used "
                f"{cpu.locust_busiest:.0%} of a core; add --workers")
    return (f"{label}: the harness was not the bottleneck: the busiest Locust process used "
            f"{cpu.locust_busiest:.0%} of one core ({cpu.locust_seconds:.1f} s in all), the "
            f"target side (servers, PostgreSQL, Toxiproxy) {target:.1f} s")


def chaos_figures(toxiproxy: ToxiproxyServer, scratch: Path, stack: ExitStack,
                  args: argparse.Namespace) -> None:
    """Part 2: the correct server under load, chaos off and on."""
    store, postmaster = None, None
    if args.servers > 1:
        postgres = stack.enter_context(start_postgres())
        store = postgres.create_database("idem_bench_load")
        postmaster = listener_pid(postgres.port)
    target = reference_target(store=store, flaw=None, servers=args.servers)
    results = {}
    for chaos in ("none", args.chaos):
        config = LoadConfig(
            target=target, users=args.users, spawn_rate=args.spawn_rate,
            duration=args.duration, report_dir=scratch / chaos, chaos=chaos,
            servers=args.servers, workers=args.workers, seed=args.seed,
            toxiproxy=toxiproxy,
        )
        results[chaos] = measured(functools.partial(run_load, config), postmaster)

    off, on = results["none"], results[args.chaos]
    print(f"{args.users} users, {args.servers} server(s), {args.workers} worker(s), "
          f"{args.duration:.0f}s each, seed {args.seed}")
    left, right = rows(*off), rows(*on)
    width = max(len(name) for name in left)
    print(f"{'':<{width}}  {'chaos off':>24}  {'chaos ' + args.chaos:>24}")
    for name, value in left.items():
        print(f"{name:<{width}}  {value:>24}  {right[name]:>24}")
    print(verdict("chaos off", *off))
    print(verdict(f"chaos {args.chaos}", *on))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--spawn-rate", type=float, default=25.0)
    parser.add_argument("--duration", type=parse_duration, default=30.0)
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--chaos", choices=[p for p in CHAOS_PROFILES if p != "none"],
                        default="storm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compare-users", type=int, default=20)
    parser.add_argument("--compare-duration", type=parse_duration, default=15.0)
    parser.add_argument("--only", choices=["compare", "chaos"], default=None)
    args = parser.parse_args()

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-load-")))
        toxiproxy = stack.enter_context(start_toxiproxy(log_dir=scratch))
        if args.only in (None, "compare"):
            compare(toxiproxy, scratch, users=args.compare_users,
                    duration=args.compare_duration, seed=args.seed)
        if args.only in (None, "chaos"):
            chaos_figures(toxiproxy, scratch, stack, args)


if __name__ == "__main__":
    stop_children_on_sigterm()  # a SIGTERM stops the services it started too
    main()

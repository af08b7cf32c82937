"""Load figures against the correct reference server, chaos off and on, side by side, and where
the CPU went: was the harness (Locust) the bottleneck, or the servers?

Both runs share one Toxiproxy and, with several servers, one PostgreSQL (IDEM_PG_DSN or a
throwaway cluster), whose CPU is read from its process tree.  "other" is whatever else ran on the
machine meanwhile: on a shared machine, read the figures with that in mind.

Run: `.venv/bin/python -P bench/load.py [--users 50] [--duration 30s] [--servers 2]
[--chaos storm]` (-P: this directory must not shadow the packages of the checkout).
"""

from __future__ import annotations

import argparse
import functools
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import psutil

from harness._durations import parse_duration
from harness._postgres import start_postgres
from harness._reference import reference_target
from harness._toxiproxy import start_toxiproxy
from harness.load import CHAOS_PROFILES, LoadConfig, LoadResult, run_load


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
    args = parser.parse_args()

    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-load-")))
        toxiproxy = stack.enter_context(start_toxiproxy(log_dir=scratch))
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


if __name__ == "__main__":
    main()

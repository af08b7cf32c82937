"""What the idempotency layer costs: POST /charges with the layer on and off, first requests and
replays, on SQLite and PostgreSQL, in one run.

    .venv/bin/python bench/idempotency_layer.py [--seconds 4] [--connections 8] [--rounds 10]
                                               [--sqlite-only]

Per store, one server with the layer and one without (the hidden ``--no-idempotency``) are
driven over keep-alive connections by a minimal HTTP/1.1 client (so the numbers are the
server's, not a client library's), the cells taking turns in short slices so that whatever
else the machine does weighs on all of them alike.  It prints throughput and p50/p99 latency,
and the two ratios the reference server promises: the layer costs at most 35% of throughput,
and a replay is no slower than a first request.  The layer's cost is judged on paired slices:
in each round the layer-off and first-request cells run one after the other, so each round's
ratio of their throughputs saw the same weather on the machine, and the median over the rounds
leaves out the rounds a burst of other work upset (on a 2-core machine shared with other jobs,
comparing each cell's single best slice instead swung by +-15 points from run to run).  The
cost on best slices and on means is shown beside it.
The servers run without provider latency, so a first request with the layer is the one-phase
path (claim, charge and response in one transaction; docs/reference-server.md, "One phase or
two"), and a replay of a key the server saw finish is claimed before any work.
PostgreSQL is ``IDEM_PG_DSN`` or a throwaway cluster; without either, its rows are skipped
with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from harness._errors import ServiceUnavailable
from harness.services._network import free_port
from harness.services._postgres import start_postgres
from harness.services._processes import ManagedProcess, stop_children_on_sigterm

BODY = json.dumps({"amount": 1250, "currency": "EUR", "customer": "cus_bench"}).encode()
LAYER_COST_GOAL = 0.35
# Built once: the client shares the machine with the servers, so its per-request work is kept
# to splicing in the key.
_HEAD = b"POST /charges HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
_TAIL = b"Content-Length: %d\r\n\r\n%s" % (len(BODY), BODY)


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell's slices: requests completed in each, all latencies, unexpected statuses."""

    store: str
    label: str
    slices: list[int]
    slice_seconds: float
    latencies: list[float]
    errors: int

    @property
    def best(self) -> float:
        """Requests per second in the cell's best slice: the least disturbed by other load."""
        return max(self.slices) / self.slice_seconds

    def paired_ratios(self, other: Cell) -> list[float]:
        """This cell's throughput over ``other``'s, round by round."""
        return [mine / theirs for mine, theirs in zip(self.slices, other.slices, strict=True)
                if theirs]

    @property
    def mean(self) -> float:
        return sum(self.slices) / (len(self.slices) * self.slice_seconds)

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


def request_bytes(key: str | None) -> bytes:
    if key is None:
        return _HEAD + _TAIL
    return b'%sIdempotency-Key: "%s"\r\n%s' % (_HEAD, key.encode(), _TAIL)


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                   request: bytes) -> int:
    """One request on a keep-alive connection; the status code."""
    writer.write(request)
    status_line = await reader.readline()
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def drive(port: int, next_key: Callable[[], str | None], *, seconds: float,
                connections: int, expect: int) -> tuple[int, list[float], int]:
    """``connections`` workers sending for ``seconds``: (requests, latencies, errors)."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline:
                request = request_bytes(next_key())
                started = time.perf_counter()
                status = await exchange(reader, writer, request)
                latencies.append(time.perf_counter() - started)
                errors += status != expect
        finally:
            writer.close()

    await asyncio.gather(*(worker() for _ in range(connections)))
    return len(latencies), latencies, errors


@contextmanager
def server(store: str, options: list[str], log_dir: Path) -> Iterator[int]:
    port = free_port()
    process = ManagedProcess(
        "reference-server",
        [sys.executable, "-m", "reference_server", "--port", str(port), "--store", store,
         "--log-level", "warning", *options],
        log_path=log_dir / f"server-{port}.log",
        ready_url=f"http://127.0.0.1:{port}/_admin/health",
    )
    with process:
        yield port


def measure(store_name: str, store: str, log_dir: Path, *, seconds: float,
            connections: int, rounds: int) -> list[Cell]:
    """The three cells of one store, interleaved in ``rounds`` slices each."""
    fresh = lambda: uuid.uuid4().hex  # noqa: E731
    with server(store, ["--no-idempotency"], log_dir) as bare, \
            server(store, [], log_dir) as layered:
        replayed = [uuid.uuid4().hex for _ in range(256)]
        asyncio.run(complete_once(layered, replayed))
        cycle = itertools.cycle(replayed)
        plans: list[tuple[str, int, Callable[[], str | None]]] = [
            ("layer off", bare, fresh),
            ("layer on, first", layered, fresh),
            ("layer on, replay", layered, lambda: next(cycle)),
        ]
        slices: dict[str, list[int]] = {label: [] for label, _, _ in plans}
        latencies: dict[str, list[float]] = {label: [] for label, _, _ in plans}
        errors = dict.fromkeys(slices, 0)
        for _, port, next_key in plans:  # warm-up: connections, statements, caches
            asyncio.run(drive(port, next_key, seconds=0.3, connections=connections, expect=201))
        for turn in range(rounds):
            # Layer off and first requests side by side, taking turns at going first.
            order = plans if turn % 2 == 0 else [plans[1], plans[0], plans[2]]
            for label, port, next_key in order:
                count, timings, failed = asyncio.run(drive(
                    port, next_key, seconds=seconds / rounds, connections=connections,
                    expect=201))
                slices[label].append(count)
                latencies[label] += timings
                errors[label] += failed
    return [Cell(store_name, label, slices[label], seconds / rounds, latencies[label],
                 errors[label]) for label in slices]


async def complete_once(port: int, keys: list[str]) -> None:
    """Send one request under each of ``keys``, over one connection, so they can be replayed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for key in keys:
            await exchange(reader, writer, request_bytes(key))
    finally:
        writer.close()


def postgres_store(stack: ExitStack) -> str | None:
    try:
        postgres = stack.enter_context(start_postgres())
    except ServiceUnavailable as exc:
        print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
        return None
    params = conninfo_to_dict(postgres.create_database("bench"))
    return f"postgresql://{params['user']}@{params['host']}:{params['port']}/{params['dbname']}"


def report(cells: list[Cell]) -> str:
    lines = [f"{'store':<11} {'cell':<18} {'best req/s':>10} {'mean req/s':>10} "
             f"{'p50 ms':>7} {'p99 ms':>7} {'errors':>6}"]
    for cell in cells:
        lines.append(f"{cell.store:<11} {cell.label:<18} {cell.best:>10.0f} {cell.mean:>10.0f} "
                     f"{cell.percentile(0.50):>7.2f} {cell.percentile(0.99):>7.2f} "
                     f"{cell.errors:>6}")
    lines.append("")
    for store in dict.fromkeys(cell.store for cell in cells):
        off, first, replay = (c for c in cells if c.store == store)
        cost = 1 - statistics.median(first.paired_ratios(off))
        best_cost = 1 - first.best / off.best
        mean_cost = 1 - first.mean / off.mean
        speed = statistics.median(replay.latencies) / statistics.median(first.latencies)
        lines.append(
            f"{store}: the layer costs {cost:.0%} of throughput, median of paired slices "
            f"({'within' if cost <= LAYER_COST_GOAL else 'over'} the {LAYER_COST_GOAL:.0%} "
            f"goal; {best_cost:.0%} on best slices, {mean_cost:.0%} on means); a replay's p50 "
            f"is {speed:.2f}x a first "
            f"request's ({'ok' if speed <= 1 else 'slower'}), its throughput "
            f"{replay.best / first.best:.2f}x"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="per cell (default 4)")
    parser.add_argument("--connections", type=int, default=8, help="concurrent (default 8)")
    parser.add_argument("--rounds", type=int, default=10,
                        help="interleaved slices per cell (default 10)")
    parser.add_argument("--sqlite-only", action="store_true")
    args = parser.parse_args()
    if not 0 < args.seconds <= 60 or not 0 < args.connections <= 256 or not args.rounds > 0:
        parser.error("--seconds must be in (0, 60], --connections in [1, 256], --rounds > 0")
    cells: list[Cell] = []
    with tempfile.TemporaryDirectory(prefix="idem-bench-") as tmp, ExitStack() as stack:
        log_dir = Path(tmp)
        options = {"seconds": args.seconds, "connections": args.connections,
                   "rounds": args.rounds}
        cells += measure("sqlite", f"sqlite:///{log_dir / 'bench.sqlite3'}", log_dir,
                         **options)
        pg = None if args.sqlite_only else postgres_store(stack)
        if pg is not None:
            cells += measure("postgresql", pg, log_dir, **options)
    print(report(cells))


if __name__ == "__main__":
    stop_children_on_sigterm()  # a SIGTERM stops the services it started too
    main()

"""What the store proxy that reads PostgreSQL's protocol costs: the reference server's
first-request latency on PostgreSQL through Toxiproxy's plain proxy, and through Toxiproxy
followed by the protocol-aware proxy (``[store_proxy] protocol = "postgresql"``), in one run.

    .venv/bin/python bench/store_proxy.py [--requests 600] [--rounds 12]

Two reference servers share one database, each reaching it its own way: the first through a
Toxiproxy proxy alone (as ``protocol = "tcp"`` runs), the second through a Toxiproxy proxy
whose upstream is the protocol-aware proxy (as every ``--postgres`` run now is).  The proxy
runs in this process, as it runs in the harness's in a run, so the client shares its
interpreter (and its lock) as the harness's clients do.  One client
sends each a POST /charges with a fresh key at a time (a first request: the one-phase path,
claim, charge and response in one statement) over a keep-alive connection of its own, the
two taking turns request by request (which goes first alternates), so that whatever else the
machine does weighs on both alike: on a shared machine, slices of many requests each saw
different weather and the ratio swung by as much as the proxy costs.  It prints p50, p90 and
the mean of each, and the ratio of the medians; the goal is at most 1.10 (the proxy adds at
most 10 % to a first request).  The ratio is judged on paired rounds: each round's two
medians are of requests sent side by side, and the median over the rounds leaves out the
rounds a burst of other work upset.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from harness._errors import ServiceUnavailable
from harness.services._commit_proxy import CommitProxy
from harness.services._network import free_port
from harness.services._postgres import start_postgres
from harness.services._processes import ManagedProcess, stop_children_on_sigterm
from harness.services._toxiproxy import start_toxiproxy

GOAL = 1.10
PLAIN = "Toxiproxy only"
READING = "Toxiproxy + protocol proxy"
BODY = json.dumps({"amount": 1250, "currency": "EUR", "customer": "cus_bench"}).encode()


def request_bytes(key: str) -> bytes:
    return (b"POST /charges HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b'Idempotency-Key: "%s"\r\nContent-Length: %d\r\n\r\n%s'
            % (key.encode(), len(BODY), BODY))


async def first_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
    """One first request on a keep-alive connection: its latency."""
    started = time.perf_counter()
    writer.write(request_bytes(uuid.uuid4().hex))
    status = int((await reader.readline()).split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    took = time.perf_counter() - started
    if status != 201:
        raise SystemExit(f"a first request was answered {status}, not 201")
    return took


async def side_by_side(ports: list[int], count: int, turn: int) -> list[list[float]]:
    """``count`` first requests to each port, one connection each, taking turns request by
    request (the first port leads on even ``turn``s and steps, the last on the others): the
    latencies of each port's requests."""
    links = [await asyncio.open_connection("127.0.0.1", port) for port in ports]
    took: list[list[float]] = [[] for _ in ports]
    try:
        for step in range(count):
            order = range(len(ports)) if (step + turn) % 2 == 0 else reversed(range(len(ports)))
            for index in order:
                took[index].append(await first_request(*links[index]))
    finally:
        for _, writer in links:
            writer.close()
    return took


@contextmanager
def server(store: str, log_dir: Path) -> Iterator[int]:
    port = free_port()
    with ManagedProcess(
        "reference-server",
        [sys.executable, "-m", "reference_server", "--port", str(port), "--store", store,
         "--log-level", "warning"],
        log_path=log_dir / f"server-{port}.log",
        ready_url=f"http://127.0.0.1:{port}/_admin/health",
    ):
        yield port


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=600, help="first requests per path")
    parser.add_argument("--rounds", type=int, default=12,
                        help="rounds, each judged on its own medians")
    args = parser.parse_args()
    with ExitStack() as stack:
        log_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-proxy-")))
        try:
            postgres = stack.enter_context(start_postgres())
        except ServiceUnavailable as exc:
            print(f"skipped: {exc}", file=sys.stderr)
            return 0
        params = conninfo_to_dict(postgres.create_database("bench"))
        database = f"{params['host']}:{params['port']}"
        toxiproxy = stack.enter_context(start_toxiproxy(log_dir=log_dir))
        reader = stack.enter_context(CommitProxy(database, "postgresql"))
        plain = toxiproxy.client.create_proxy("bench-plain", database)
        reading = toxiproxy.client.create_proxy("bench-reading", reader.listen)
        dsn = f"postgresql://{params['user']}@{{}}/{params['dbname']}"
        servers = {
            PLAIN: stack.enter_context(server(dsn.format(plain.listen), log_dir)),
            READING: stack.enter_context(server(dsn.format(reading.listen), log_dir)),
        }
        # As in a run, the client reaches each server through a Toxiproxy proxy of its own;
        # directly, the server's own latency is the denominator.
        fronts = {name: toxiproxy.client.create_proxy(f"bench-front-{n}", f"127.0.0.1:{port}")
                  for n, (name, port) in enumerate(servers.items())}
        paths = {("as in a run", name): fronts[name].port for name in servers}
        paths.update({("direct", name): port for name, port in servers.items()})
        per_round = max(1, args.requests // args.rounds)
        # Warm-up: connections, prepared plans, caches.
        asyncio.run(side_by_side(list(paths.values()), 50, 0))
        latencies: dict[tuple[str, str], list[float]] = {path: [] for path in paths}
        ratios: dict[str, list[float]] = {"as in a run": [], "direct": []}
        for turn in range(args.rounds):
            for client in ratios:
                pair = [(client, PLAIN), (client, READING)]
                plain, reading = asyncio.run(side_by_side([paths[p] for p in pair], per_round,
                                                          turn))
                latencies[pair[0]] += plain
                latencies[pair[1]] += reading
                ratios[client].append(statistics.median(reading) / statistics.median(plain))
    print(f"{'client to server':<12} {'server to PostgreSQL':<28} {'p50 ms':>7} {'p90 ms':>7} "
          f"{'mean ms':>8} {'n':>5}")
    for (client, name), took in latencies.items():
        ordered = sorted(took)
        print(f"{client:<12} {name:<28} {statistics.median(ordered) * 1000:7.3f} "
              f"{ordered[int(0.9 * len(ordered))] * 1000:7.3f} "
              f"{statistics.fmean(ordered) * 1000:8.3f} {len(ordered):5d}")
    for client, paired in ratios.items():
        ratio = statistics.median(paired)
        added = (statistics.median(latencies[(client, READING)])
                 - statistics.median(latencies[(client, PLAIN)])) * 1e6
        verdict = "met" if ratio <= GOAL else "MISSED"
        print(f"{client}: first-request latency, protocol proxy / plain {ratio:.3f} (median of "
              f"{len(paired)} paired rounds; {added:+.0f} us at p50); goal <= {GOAL:.2f}: "
              f"{verdict}")
    return 0


if __name__ == "__main__":
    stop_children_on_sigterm()  # a SIGTERM stops the services it started too
    sys.exit(main())

"""A charge worker on aiokafka (asyncio) with its dedup in Redis.

Choices: the dedup key is the record's own key; the key is claimed with ``SET dedup:KEY
claim:TOKEN NX EX 30`` (a 30 s lease), and the charge and the key's "done" mark (kept 24 h) are
written by one Lua script that checks the claim is still ours; a record whose key another member
holds waits until the key is done (then it is a duplicate) or the claim ran out; the offset is
committed (``commit({tp: offset + 1})``) after the script, ``enable_auto_commit=False``; one
record at a time (``getone``); a failed job releases its claim and is read again (seek back),
and goes to the dead-letter topic at its third delivery in this process; a poison record (no
key, not a charge) goes to the dead-letter topic at once; an events feed on ``--port``.  Test
hooks (record headers): ``X-Test-Pause: before-work:MS`` or ``before-commit:MS``, and
``X-Test-Fault: before-work|after-work``.

Flaws: ``enable-auto-commit`` keeps aiokafka's default, ``enable_auto_commit=True`` (every
100 ms here), and commits nothing itself: the position ``getone`` reached is committed while the
job runs; ``dedup-in-memory`` remembers finished keys in a set of the process instead of Redis.

Run: python consumer.py --bootstrap HOST:PORT --topic T --group G --dlt T.dead --redis URL
     --port PORT [--session-timeout-ms N] [--max-poll-interval-ms N] [--flaw F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis
import redis.asyncio as aredis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

FLAWS = ("enable-auto-commit", "dedup-in-memory")
LEASE = 30
WINDOW = 24 * 3600
MAX_DELIVERIES = 3
COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], 'done', 'EX', ARGV[3])
return 1"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0"""


class Events:
    """What the worker did, numbered, for GET /events?after=N (read from the HTTP thread)."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def add(self, kind: str, key: str | None, **fields: Any) -> None:
        with self.lock:
            self.items.append({"index": len(self.items), "type": kind, "key": key,
                               "pid": os.getpid(), "time": time.time(), **fields})


class Poison(ValueError):
    pass


def header(record: Any, name: str) -> str:
    for key, value in record.headers or ():
        if key.lower() == name.lower():
            return value.decode() if isinstance(value, bytes) else str(value)
    return ""


class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    async def on_partitions_revoked(self, revoked: Any) -> None:
        self.worker.events.add("revoked", None, partitions=sorted(p.partition for p in revoked))

    async def on_partitions_assigned(self, assigned: Any) -> None:
        self.worker.events.add("assigned", None, partitions=sorted(p.partition for p in assigned))
        self.worker.assigned.set()


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.events = Events()
        self.assigned = threading.Event()
        self.remembered: set[str] = set()  # the dedup-in-memory flaw's whole dedup table
        self.deliveries: dict[tuple[int, int], int] = {}
        self.store = aredis.from_url(args.redis)
        self.auto = args.flaw == "enable-auto-commit"
        self.consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group,
            auto_offset_reset="earliest", enable_auto_commit=self.auto,
            auto_commit_interval_ms=100, session_timeout_ms=args.session_timeout_ms,
            heartbeat_interval_ms=max(100, args.session_timeout_ms // 3),
            max_poll_interval_ms=args.max_poll_interval_ms)
        self.producer = AIOKafkaProducer(bootstrap_servers=args.bootstrap, acks="all")

    async def handle(self, record: Any) -> None:
        key = record.key.decode() if record.key else None
        tp = TopicPartition(record.topic, record.partition)
        earlier = self.deliveries.get((record.partition, record.offset), 0)
        self.deliveries[(record.partition, record.offset)] = earlier + 1
        self.events.add("deliver", key, partition=record.partition, offset=record.offset,
                        redelivered=earlier > 0)
        try:
            amount = self.charge(record, key)
        except Poison as exc:
            self.events.add("poison", key, reason=str(exc))
            await self.dead_letter(record, key, str(exc))
            return
        first = earlier == 0
        pause = header(record, "X-Test-Pause") if first else ""
        fault = header(record, "X-Test-Fault") if first else ""
        try:
            outcome = await self.work(str(key), amount, pause, fault)
        except Exception as exc:
            self.events.add("work-failed", key, reason=str(exc), attempt=earlier + 1)
            if earlier + 1 >= MAX_DELIVERIES:
                await self.dead_letter(record, key, f"{exc} (delivery {earlier + 1})")
            else:
                await asyncio.sleep(0.1)
                self.consumer.seek(tp, record.offset)
                self.events.add("nack", key, reason=str(exc))
            return
        await self.hook(key, pause, "before-commit")
        await self.commit(record, key, outcome)

    def charge(self, record: Any, key: str | None) -> int:
        if not key:
            raise Poison("the record has no key")
        try:
            charge = json.loads(record.value or b"")
        except ValueError:
            raise Poison("the body is not JSON") from None
        amount = charge.get("amount") if isinstance(charge, dict) else None
        if not isinstance(amount, int) or isinstance(amount, bool) or amount < 1:
            raise Poison("amount must be a positive integer")
        return amount

    async def work(self, key: str, amount: int, pause: str, fault: str) -> str:
        charge = json.dumps({"id": f"ch_{secrets.token_hex(8)}", "amount": amount})
        if self.args.flaw == "dedup-in-memory":
            if key in self.remembered:
                return "duplicate"
            self.events.add("claim", key)
            await self.hook(key, pause, "before-work")
            if fault == "before-work":
                raise RuntimeError("X-Test-Fault: before-work")
            await self.store.rpush(f"ledger:{key}", charge)
            self.remembered.add(key)
            self.events.add("commit", key)
            if fault == "after-work":
                raise RuntimeError("X-Test-Fault: after-work")
            return "done"
        token = f"claim:{secrets.token_hex(8)}"
        while not await self.store.set(f"dedup:{key}", token, nx=True, ex=LEASE):
            if await self.store.get(f"dedup:{key}") == b"done":
                return "duplicate"
            await asyncio.sleep(0.2)
        self.events.add("claim", key)
        try:
            await self.hook(key, pause, "before-work")
            if fault == "before-work":
                raise RuntimeError("X-Test-Fault: before-work")
            committed = await self.store.eval(COMMIT, 2, f"dedup:{key}", f"ledger:{key}",
                                              token, charge, str(WINDOW))
        except BaseException:
            await self.store.eval(RELEASE, 1, f"dedup:{key}", token)
            raise
        if not committed:
            raise RuntimeError("the claim ran out before the commit")
        self.events.add("commit", key)
        if fault == "after-work":
            raise RuntimeError("X-Test-Fault: after-work")
        return "done"

    async def hook(self, key: str | None, pause: str, point: str) -> None:
        if pause.startswith(point + ":"):
            seconds = int(pause.split(":")[1]) / 1000
            self.events.add("pause", key, point=point, seconds=seconds)
            await asyncio.sleep(seconds)

    async def commit(self, record: Any, key: str | None, outcome: str) -> None:
        if self.auto:
            self.events.add("processed", key, outcome=outcome)
            return
        tp = TopicPartition(record.topic, record.partition)
        try:
            await self.consumer.commit({tp: record.offset + 1})
        except (CommitFailedError, KafkaError) as exc:
            self.events.add("ack-lost", key, reason=str(exc))
            return
        self.events.add("offset-commit", key, outcome=outcome, offset=record.offset)

    async def dead_letter(self, record: Any, key: str | None, reason: str) -> None:
        headers = [*(record.headers or ()), ("x-dead-letter-reason", reason.encode())]
        await self.producer.send_and_wait(self.args.dlt, value=record.value, key=record.key,
                                          headers=headers)
        self.events.add("dead-letter", key, topic=self.args.dlt, reason=reason)
        await self.commit(record, key, "dead-lettered")

    async def run(self, stop: asyncio.Event) -> None:
        await self.producer.start()
        self.consumer.subscribe([self.args.topic], listener=Listener(self))
        await self.consumer.start()
        try:
            while not stop.is_set():
                try:
                    record = await asyncio.wait_for(self.consumer.getone(), 0.5)
                except TimeoutError:
                    continue
                await self.handle(record)
        finally:
            await self.consumer.stop()
            await self.producer.stop()


def serve(worker: Worker, port: int) -> None:
    store = redis.Redis.from_url(worker.args.redis)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/events":
                after = int(query.get("after", ["0"])[0])
                with worker.events.lock:
                    items = worker.events.items[after:]
                    data: Any = {"events": items, "next": after + len(items)}
            elif url.path == "/effects":
                data = {"count": store.llen(f"ledger:{query.get('key', [''])[0]}")}
            else:
                data = {"ok": True}
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


async def main() -> None:
    parser = argparse.ArgumentParser()
    for option in ("--bootstrap", "--topic", "--group", "--dlt", "--redis"):
        parser.add_argument(option, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=10000)
    parser.add_argument("--max-poll-interval-ms", type=int, default=300000)
    parser.add_argument("--flaw", choices=FLAWS)
    args = parser.parse_args()
    worker = Worker(args)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    # The port opens once the group gave this member its partitions.
    def serve_when_assigned() -> None:
        worker.assigned.wait()
        serve(worker, args.port)

    threading.Thread(target=serve_when_assigned, daemon=True).start()
    await worker.run(stop)


if __name__ == "__main__":
    asyncio.run(main())

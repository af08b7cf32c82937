"""A charge worker on FastStream (aio-pika): dedup in Redis with SET NX and a TTL.

Choices: the dedup key is the body's ``key`` field (FastStream hands a job its body); the key is
claimed with ``SET dedup:KEY claim:TOKEN NX EX 30`` (a 30 s lease), and the charge and the key's
"done" mark (kept 24 h) are written by one Lua script that checks the claim is still ours; a
delivery that finds a live claim holds the message and looks again until the key is done or the
claim ran out; four jobs at once (prefetch 4); a failed job releases its claim and is requeued,
and dead-lettered at its third delivery; no events feed; the ledger is a Redis list per key,
counted at ``GET /effects?key=K`` on ``--port``.  Test hooks are body fields, honoured on a first
delivery only: ``test_pause = "before-work:MS"``, ``test_fault = "before-work|after-work"``
(``...:every`` on every delivery).  Redis and the worker read the wall clock the harness moves.

Flaws: ``claim-kept-on-failure`` claims with the 24 h mark itself and keeps it when the job fails
(the retry finds the key and acks it as done); ``short-ttl`` remembers a finished key 10
minutes, not 24 h.  ``--flaw`` repeats: the two combine.

Run: python consumer.py --amqp-url URL --queue Q --dlq DLQ --redis URL --port PORT
     [--flaw F]...
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import redis
import redis.asyncio as aioredis
from faststream import AckPolicy, FastStream
from faststream.rabbit import Channel, QueueType, RabbitBroker, RabbitMessage, RabbitQueue

FLAWS = ("claim-kept-on-failure", "short-ttl")
LEASE = 30
WINDOW = 24 * 3600
MAX_ATTEMPTS = 3
COMMIT = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('SET', KEYS[1], 'done', 'EX', ARGV[3])
return 1
"""


class Poison(ValueError):
    pass


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    for option in ("--amqp-url", "--queue", "--dlq", "--redis"):
        parser.add_argument(option, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flaw", dest="flaws", action="append", choices=FLAWS, default=[])
    return parser.parse_args()


ARGS = parse()
TTL = 600 if "short-ttl" in ARGS.flaws else WINDOW
store = aioredis.from_url(ARGS.redis)
commit = store.register_script(COMMIT)
broker = RabbitBroker(f"{ARGS.amqp_url}?heartbeat=2", reconnect_interval=0.5,
                      graceful_timeout=2.0, log_level=30)
queue = RabbitQueue(ARGS.queue, durable=True, queue_type=QueueType.QUORUM,
                    arguments={"x-dead-letter-exchange": "",
                               "x-dead-letter-routing-key": ARGS.dlq})
app = FastStream(broker)


def job_of(body: bytes) -> dict[str, Any]:
    try:
        job = json.loads(body)
    except ValueError:
        raise Poison("the body is not JSON") from None
    amount = job.get("amount") if isinstance(job, dict) else None
    if not isinstance(job, dict) or not isinstance(job.get("key"), str) or not job["key"]:
        raise Poison("the body has no key")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount < 1:
        raise Poison("amount must be a positive integer")
    return job


def hook(job: dict[str, Any], name: str, first: bool) -> str:
    value = str(job.get(name) or "")
    every = value.endswith(":every")
    return value.removesuffix(":every") if first or every else ""


async def claim(key: str, token: str) -> bool:
    """Claim the key, waiting while another consumer's live claim holds it; False when the
    key is done already."""
    while True:
        if "claim-kept-on-failure" in ARGS.flaws:
            return bool(await store.set(f"dedup:{key}", token, nx=True, ex=TTL))
        if await store.set(f"dedup:{key}", token, nx=True, ex=LEASE):
            return True
        if await store.get(f"dedup:{key}") == b"done":
            return False
        await asyncio.sleep(0.2)


@broker.subscriber(queue, channel=Channel(prefetch_count=4), ack_policy=AckPolicy.MANUAL)
async def handle(body: Any, message: RabbitMessage) -> None:
    raw = message.raw_message
    deliveries = int((raw.headers or {}).get("x-delivery-count") or 0)
    first = not raw.redelivered and deliveries == 0
    try:
        job = job_of(raw.body)
    except Poison:
        await message.reject()  # into the dead-letter queue
        return
    key, token = job["key"], f"claim:{secrets.token_hex(8)}"
    try:
        if not await claim(key, token):
            await message.ack()
            return
        pause, fault = hook(job, "test_pause", first), hook(job, "test_fault", first)
        if pause.startswith("before-work:"):
            await asyncio.sleep(int(pause.split(":")[1]) / 1000)
        if fault == "before-work":
            raise RuntimeError("test_fault: before-work")
        charge = json.dumps({"id": f"ch_{secrets.token_hex(8)}", "amount": job["amount"]})
        if not await commit(keys=[f"dedup:{key}", f"ledger:{key}"], args=[token, charge, TTL]):
            await message.nack(requeue=True)  # our claim ran out: the redelivery finds out
            return
        if fault == "after-work":
            raise RuntimeError("test_fault: after-work")
    except Exception:
        if "claim-kept-on-failure" not in ARGS.flaws:
            await store.eval("if redis.call('GET', KEYS[1]) == ARGV[1] then "
                             "return redis.call('DEL', KEYS[1]) end return 0", 1,
                             f"dedup:{key}", token)
        await asyncio.sleep(0.2)
        if deliveries + 1 >= MAX_ATTEMPTS:
            await message.reject()
        else:
            await message.nack(requeue=True)
        return
    await message.ack()


@app.after_startup
async def serve_effects() -> None:
    """Declare the dead-letter queue, then open the port: the worker consumes by now, and the
    harness publishes as soon as the port answers."""
    await broker.declare_queue(RabbitQueue(ARGS.dlq, durable=True, queue_type=QueueType.QUORUM))
    ledger = redis.Redis.from_url(ARGS.redis)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/effects":
                key = parse_qs(url.query).get("key", [""])[0]
                data: Any = {"count": ledger.llen(f"ledger:{key}")}
            elif url.path == "/time":
                seconds, micros = ledger.time()
                data = seconds + micros / 1e6
            else:
                data = {"ok": True}
            out = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


if __name__ == "__main__":
    asyncio.run(app.run())

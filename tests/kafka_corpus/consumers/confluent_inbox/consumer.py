"""A charge worker on confluent-kafka (librdkafka): an inbox table in SQLite, written in the job's
transaction, and the offset committed after it.

Choices: the dedup key is the ``Idempotency-Key`` header; the inbox row and the charge are
inserted in one ``BEGIN IMMEDIATE`` transaction, so the key is claimed by the database's write
lock for the whole job and a crash rolls both back; the offset is committed synchronously once
that transaction committed (``enable.auto.commit`` off); one record at a time; a failed job is
read again (seek back) and sent to the dead-letter topic at its third delivery in this process;
a poison record (no key, not a charge) goes to the dead-letter topic at once, then its offset is
committed; an events feed on ``--port``.  Test hooks (record headers): ``X-Test-Pause:
before-work:MS`` or ``before-commit:MS`` (after the job, before the offset commit), and
``X-Test-Fault: before-work|after-work``.

Flaws: ``auto-commit`` keeps the library's default, ``enable.auto.commit=true``, and commits
nothing itself (the timer commits what poll returned, before the job ends); ``dedup-on-offset``
keys the inbox on the record's topic, partition and offset.

Run: python consumer.py --bootstrap HOST:PORT --topic T --group G --dlt T.dead --db FILE
     --port PORT [--session-timeout-ms N] [--max-poll-interval-ms N] [--flaw F]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

FLAWS = ("auto-commit", "dedup-on-offset")
MAX_DELIVERIES = 3
SCHEMA = """
create table if not exists inbox (key text primary key, done_at real not null);
create table if not exists charges (id text primary key, idempotency_key text not null,
                                    amount integer not null, currency text not null);
"""


class Events:
    """What the worker did, numbered, for GET /events?after=N."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def add(self, kind: str, key: str | None, **fields: Any) -> None:
        with self.lock:
            self.items.append({"index": len(self.items), "type": kind, "key": key,
                               "pid": os.getpid(), "time": time.time(), **fields})


class Poison(ValueError):
    pass


def header(message: Message, name: str) -> str | None:
    for key, value in message.headers() or []:
        if key.lower() == name.lower():
            return value.decode() if isinstance(value, bytes) else str(value)
    return None


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.events = Events()
        self.db = sqlite3.connect(args.db, timeout=30, isolation_level=None,
                                  check_same_thread=False)
        self.db.executescript(SCHEMA)
        self.deliveries: dict[tuple[int, int], int] = {}
        self.assigned = threading.Event()
        self.stopping = False
        auto = args.flaw == "auto-commit"
        self.consumer = Consumer({
            "bootstrap.servers": args.bootstrap, "group.id": args.group,
            "auto.offset.reset": "earliest", "enable.auto.commit": auto,
            "auto.commit.interval.ms": 100, "session.timeout.ms": args.session_timeout_ms,
            "heartbeat.interval.ms": max(100, args.session_timeout_ms // 3),
            "max.poll.interval.ms": args.max_poll_interval_ms,
            "reconnect.backoff.max.ms": 500, "log_level": 3,
        })
        self.producer = Producer({"bootstrap.servers": args.bootstrap, "acks": "all",
                                  "log_level": 3})

    # -- the job ---------------------------------------------------------------------------

    def handle(self, message: Message) -> None:
        key = header(message, "Idempotency-Key")
        place = {"partition": message.partition(), "offset": message.offset()}
        position = (message.partition() or 0, message.offset() or 0)
        earlier = self.deliveries.get(position, 0)
        self.deliveries[position] = earlier + 1
        self.events.add("deliver", key, redelivered=earlier > 0, **place)
        try:
            amount, currency = self.charge(message, key)
        except Poison as exc:
            self.events.add("poison", key, reason=str(exc))
            self.dead_letter(message, key, str(exc))
            return
        first = earlier == 0
        pause = (header(message, "X-Test-Pause") or "") if first else ""
        fault = (header(message, "X-Test-Fault") or "") if first else ""
        dedup = str(key)
        if self.args.flaw == "dedup-on-offset":
            dedup = f"{message.topic()}/{message.partition()}/{message.offset()}"
        try:
            outcome = self.work(str(key), dedup, amount, currency, pause, fault)
        except Exception as exc:  # the job failed; nothing was committed
            self.events.add("work-failed", key, reason=str(exc), attempt=earlier + 1)
            if earlier + 1 >= MAX_DELIVERIES:
                self.dead_letter(message, key, f"{exc} (delivery {earlier + 1})")
            else:
                time.sleep(0.1)
                self.consumer.seek(TopicPartition(message.topic(), message.partition(),
                                                  message.offset()))
                self.events.add("nack", key, reason=str(exc))
            return
        self.hook(key, pause, "before-commit")
        self.commit(message, key, outcome)

    def charge(self, message: Message, key: str | None) -> tuple[int, str]:
        if not key:
            raise Poison("no Idempotency-Key header")
        try:
            charge = json.loads(message.value() or b"")
        except ValueError:
            raise Poison("the body is not JSON") from None
        amount = charge.get("amount") if isinstance(charge, dict) else None
        if not isinstance(amount, int) or isinstance(amount, bool) or amount < 1:
            raise Poison("amount must be a positive integer")
        return amount, str(charge.get("currency", "usd"))

    def work(self, key: str, dedup: str, amount: int, currency: str, pause: str,
             fault: str) -> str:
        self.db.execute("begin immediate")
        try:
            if self.db.execute("insert into inbox values (?, ?) on conflict do nothing",
                               (dedup, time.time())).rowcount == 0:
                self.db.execute("rollback")
                return "duplicate"
            self.events.add("claim", key)
            self.hook(key, pause, "before-work")
            if fault == "before-work":
                raise RuntimeError("X-Test-Fault: before-work")
            charge = f"ch_{secrets.token_hex(8)}"
            self.db.execute("insert into charges values (?, ?, ?, ?)",
                            (charge, key, amount, currency))
            self.db.execute("commit")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("rollback")
            raise
        self.events.add("commit", key, charge=charge)
        if fault == "after-work":
            raise RuntimeError("X-Test-Fault: after-work")
        return "done"

    def hook(self, key: str | None, pause: str, point: str) -> None:
        if pause.startswith(point + ":"):
            seconds = int(pause.split(":")[1]) / 1000
            self.events.add("pause", key, point=point, seconds=seconds)
            time.sleep(seconds)

    def commit(self, message: Message, key: str | None, outcome: str) -> None:
        if self.args.flaw == "auto-commit":
            self.events.add("processed", key, outcome=outcome)
            return
        try:
            self.consumer.commit(message=message, asynchronous=False)
        except KafkaException as exc:
            self.events.add("ack-lost", key, reason=str(exc.args[0]))
            return
        self.events.add("offset-commit", key, outcome=outcome, offset=message.offset())

    def dead_letter(self, message: Message, key: str | None, reason: str) -> None:
        headers = [*(message.headers() or []), ("x-dead-letter-reason", reason.encode())]
        self.producer.produce(self.args.dlt, value=message.value(), key=message.key(),
                              headers=headers)
        if self.producer.flush(10) != 0:
            self.events.add("work-failed", key, reason="the dead-letter topic did not answer")
            return
        self.events.add("dead-letter", key, topic=self.args.dlt, reason=reason)
        self.commit(message, key, "dead-lettered")

    # -- the loop ----------------------------------------------------------------------------

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.events.add("assigned", None, partitions=[p.partition for p in partitions])
        self.assigned.set()

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.events.add("revoked", None, partitions=[p.partition for p in partitions])

    def run(self) -> None:
        self.consumer.subscribe([self.args.topic], on_assign=self.on_assign,
                                on_revoke=self.on_revoke)
        while not self.stopping:
            message = self.consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._MAX_POLL_EXCEEDED:
                    self.events.add("left-group", None, reason=error.str())
                continue
            self.handle(message)
        self.consumer.close()


def serve(worker: Worker, port: int) -> None:
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
                with sqlite3.connect(worker.args.db, timeout=5) as db:
                    count = db.execute("select count(*) from charges where idempotency_key = ?",
                                       (query.get("key", [""])[0],)).fetchone()[0]
                data = {"count": count}
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


def main() -> None:
    parser = argparse.ArgumentParser()
    for option in ("--bootstrap", "--topic", "--group", "--dlt", "--db"):
        parser.add_argument(option, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--session-timeout-ms", type=int, default=10000)
    parser.add_argument("--max-poll-interval-ms", type=int, default=300000)
    parser.add_argument("--flaw", choices=FLAWS)
    args = parser.parse_args()
    worker = Worker(args)

    def stop(*_: Any) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, stop)

    # The port opens once the group gave this member its partitions.
    def serve_when_assigned() -> None:
        worker.assigned.wait()
        serve(worker, args.port)

    threading.Thread(target=serve_when_assigned, daemon=True).start()
    worker.run()


if __name__ == "__main__":
    main()

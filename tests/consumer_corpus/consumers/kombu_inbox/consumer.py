"""A charge worker on kombu (py-amqp): an inbox table in SQLite, written in the job's transaction.

Choices: the dedup key is the ``Idempotency-Key`` header; the key row and the charge are inserted
in one ``BEGIN IMMEDIATE`` transaction, so the key is claimed by the database's write lock for the
whole job (a copy waits on the lock, then finds the key) and a crash rolls both back (no lease);
one message at a time (prefetch 1); a failed job is requeued for ever; a poison message (not a
charge) is rejected into the dead-letter queue; finished keys are remembered 24 h on the
process's wall clock; an events feed on ``--port``.  Test hooks: ``X-Test-Pause:
before-work:MS`` and ``X-Test-Fault: before-work|after-work``, on a first delivery only.

Flaws: ``ack-before-work`` acks each message as it arrives; ``dedup-outside-txn`` looks the key
up, charges in one transaction and records the key in another.  ``--flaw`` repeats: the two
combine.

Run: python consumer.py --amqp-url URL --queue Q --dlq DLQ --db FILE --port PORT [--flaw F]...
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import signal
import sqlite3
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kombu import Connection, Consumer, Exchange, Queue
from kombu.exceptions import OperationalError
from kombu.message import Message

FLAWS = ("ack-before-work", "dedup-outside-txn")
WINDOW = 24 * 3600.0
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


class Worker:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.events = Events()
        self.db = sqlite3.connect(args.db, timeout=0.2, isolation_level=None,
                                  check_same_thread=False)
        self.db.executescript(SCHEMA)
        #: py-amqp's own connection, for heartbeats during a long job (kombu's would try to
        #: connect again, inside the job, when the broker has dropped it).
        self.connection: Any = None
        self.stopping = False
        self.consuming = threading.Event()

    # -- the job ---------------------------------------------------------------------------

    def on_message(self, message: Message) -> None:
        headers = {k.lower(): v for k, v in (message.headers or {}).items()}
        key = headers.get("idempotency-key")
        first = not message.delivery_info.get("redelivered") and not headers.get(
            "x-delivery-count")
        self.events.add("deliver", key, message_id=message.properties.get("message_id"),
                        redelivered=bool(message.delivery_info.get("redelivered")))
        if "ack-before-work" in self.args.flaws:
            self._settle(message, key, "ack")
        try:
            amount, currency = self._charge(message.body, key)
        except Poison as exc:
            self.events.add("poison", key, reason=str(exc))
            if "ack-before-work" not in self.args.flaws:
                self._settle(message, key, "dead-letter")
            return
        fault = str(headers.get("x-test-fault", "")) if first else ""
        pause = str(headers.get("x-test-pause", "")) if first else ""
        try:
            outcome = self._work(str(key), amount, currency, pause, fault)
        except Exception as exc:  # the job failed: requeue it, nothing was committed
            self.events.add("work-failed", key, reason=str(exc))
            if "ack-before-work" not in self.args.flaws:
                self._settle(message, key, "requeue")
            return
        if "ack-before-work" not in self.args.flaws:
            self._settle(message, key, "ack", outcome=outcome)

    def _charge(self, body: bytes, key: Any) -> tuple[int, str]:
        if not isinstance(key, str) or not key:
            raise Poison("no Idempotency-Key header")
        try:
            charge = json.loads(body)
        except ValueError:
            raise Poison("the body is not JSON") from None
        amount = charge.get("amount") if isinstance(charge, dict) else None
        if not isinstance(amount, int) or isinstance(amount, bool) or amount < 1:
            raise Poison("amount must be a positive integer")
        return amount, str(charge.get("currency", "usd"))

    def _work(self, key: str, amount: int, currency: str, pause: str, fault: str) -> str:
        if "dedup-outside-txn" in self.args.flaws:
            return self._work_outside(key, amount, currency, pause, fault)
        self._locked("begin immediate")
        try:
            now = time.time()
            self.db.execute("delete from inbox where key = ? and done_at < ?",
                            (key, now - WINDOW))
            if self.db.execute("insert into inbox values (?, ?) on conflict do nothing",
                               (key, now)).rowcount == 0:
                self.db.execute("rollback")
                return "duplicate"
            self.events.add("claim", key)
            self._hooks(key, pause, fault, "before-work")
            charge = f"ch_{secrets.token_hex(8)}"
            self.db.execute("insert into charges values (?, ?, ?, ?)",
                            (charge, key, amount, currency))
            self.db.execute("commit")
        except BaseException:
            if self.db.in_transaction:
                self.db.execute("rollback")
            raise
        self.events.add("commit", key, charge=charge)
        self._hooks(key, pause, fault, "after-work")
        return "done"

    def _work_outside(self, key: str, amount: int, currency: str, pause: str,
                      fault: str) -> str:
        """Flaw: the key is looked up, the charge committed, and only then the key stored."""
        found = self.db.execute("select 1 from inbox where key = ? and done_at >= ?",
                                (key, time.time() - WINDOW)).fetchone()
        if found:
            return "duplicate"
        self._hooks(key, pause, fault, "before-work")
        charge = f"ch_{secrets.token_hex(8)}"
        self._locked("begin immediate")
        self.db.execute("insert into charges values (?, ?, ?, ?)", (charge, key, amount, currency))
        self.db.execute("commit")
        self.events.add("commit", key, charge=charge)
        self._locked("begin immediate")
        self.db.execute("insert or replace into inbox values (?, ?)", (key, time.time()))
        self.db.execute("commit")
        self._hooks(key, pause, fault, "after-work")
        return "done"

    def _locked(self, statement: str) -> None:
        """Take SQLite's write lock, sending heartbeats while another process holds it."""
        while True:
            try:
                self.db.execute(statement)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc):
                    raise
                self._heartbeat()

    def _hooks(self, key: str, pause: str, fault: str, point: str) -> None:
        if pause.startswith(point + ":"):
            seconds = int(pause.split(":")[1]) / 1000
            self.events.add("pause", key, point=point, seconds=seconds)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                self._heartbeat()
                time.sleep(0.1)
        if fault == point:
            raise RuntimeError(f"X-Test-Fault: {point}")

    def _heartbeat(self) -> None:
        if self.connection is not None:
            with contextlib.suppress(Exception):  # a lost connection shows at the ack
                self.connection.heartbeat_tick()

    def _settle(self, message: Message, key: Any, how: str, **fields: Any) -> None:
        try:
            if how == "ack":
                message.ack()
            elif how == "requeue":
                message.requeue()
            else:
                message.reject(requeue=False)
        except Exception as exc:
            self.events.add("ack-lost", key, reason=str(exc))
            return
        kind = {"ack": "ack", "requeue": "nack", "dead-letter": "dead-letter"}[how]
        self.events.add(kind, key, **fields)

    # -- the broker --------------------------------------------------------------------------

    def run(self) -> None:
        dead = Queue(self.args.dlq, Exchange(""), routing_key=self.args.dlq, durable=True,
                     queue_arguments={"x-queue-type": "quorum"})
        main = Queue(self.args.queue, Exchange(""), routing_key=self.args.queue, durable=True,
                     queue_arguments={"x-queue-type": "quorum", "x-dead-letter-exchange": "",
                                      "x-dead-letter-routing-key": self.args.dlq})
        lost = (OSError, OperationalError, *Connection(self.args.amqp_url).connection_errors,
                *Connection(self.args.amqp_url).channel_errors)
        while not self.stopping:
            conn = Connection(self.args.amqp_url, heartbeat=2, connect_timeout=5,
                              transport_options={"read_timeout": 5, "write_timeout": 5})
            try:
                # One try at a time: kombu's own retries would wait here for ever.
                conn.ensure_connection(max_retries=1, interval_start=0, timeout=5)
                channel = conn.channel()
                self.connection = conn.connection
                dead(channel).declare()
                main(channel).declare()
                with Consumer(channel, queues=[main], on_message=self.on_message,
                              prefetch_count=1):
                    self.consuming.set()
                    while not self.stopping:
                        try:
                            conn.drain_events(timeout=0.2)
                        except TimeoutError:
                            self.connection.heartbeat_tick()
            except lost as exc:
                # A connection the broker gave up on: drop it without the closing handshake,
                # which would wait for an answer that never comes, and connect again.
                print(f"connection lost ({exc!r}): connecting again", file=sys.stderr,
                      flush=True)
                conn.collect()
                time.sleep(0.3)
            else:
                conn.release()


def serve(worker: Worker, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/events":
                after = int(parse_qs(url.query).get("after", ["0"])[0])
                with worker.events.lock:
                    items = worker.events.items[after:]
                    data: Any = {"events": items, "next": after + len(items)}
            elif url.path == "/keys":
                with sqlite3.connect(worker.args.db, timeout=5) as db:
                    rows = db.execute("select count(*) from inbox").fetchone()[0]
                data = {"rows": rows}
            elif url.path == "/time":
                data = time.time()
            else:
                data = {"ok": True}
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:  # /cleanup: forget keys past the window
            db = sqlite3.connect(worker.args.db, timeout=5)
            with db:
                db.execute("delete from inbox where done_at < ?", (time.time() - WINDOW,))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main() -> None:
    parser = argparse.ArgumentParser()
    for option in ("--amqp-url", "--queue", "--dlq", "--db"):
        parser.add_argument(option, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--flaw", dest="flaws", action="append", choices=FLAWS, default=[])
    args = parser.parse_args()
    worker = Worker(args)

    def stop(*_: Any) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, stop)
    # The port opens once the worker consumes: the harness publishes as soon as it answers.
    def serve_when_consuming() -> None:
        worker.consuming.wait()
        serve(worker, args.port)

    threading.Thread(target=serve_when_consuming, daemon=True).start()
    worker.run()


if __name__ == "__main__":
    main()

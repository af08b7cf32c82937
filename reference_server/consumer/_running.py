"""Running a consumer process: store, clock, cleanup job, worker, broker and admin port.

The broker is an adapter: RabbitMQ's queue consumer (``_broker``) or a Kafka group member
(``_kafka``), chosen by ``settings.broker``; everything else is the same process.

The admin port opens only once the consumer is consuming, so a harness that waits for
``/_admin/health`` knows messages will be taken from then on.  SIGTERM and SIGINT stop it
cleanly: no new deliveries, running jobs get a moment to finish, unfinished ones go back to the
queue when the connection closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import uvicorn

from reference_server._cleanup import CleanupJob
from reference_server._clock import ServerClock
from reference_server.consumer._admin import consumer_admin_app
from reference_server.consumer._behaviour import CORRECT
from reference_server.consumer._broker import BrokerUnreachable, QueueConsumer
from reference_server.consumer._events import EventLog
from reference_server.consumer._kafka import TopicConsumer
from reference_server.consumer._settings import ConsumerSettings
from reference_server.consumer._worker import Worker
from reference_server.consumer.flaws import consumer_flaws_named, kafka_consumer_flaws_named
from reference_server.flaws import with_flaws
from reference_server.stores import StoreUnavailable, store_from_url

__all__ = ["STARTUP_FAILED", "run_consumer"]

STARTUP_FAILED = 3


class _AdminServer(uvicorn.Server):
    """uvicorn without its own signal handling: the consumer's handlers stop both."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def _serve(settings: ConsumerSettings) -> None:
    kafka = settings.broker == "kafka"
    named = kafka_consumer_flaws_named if kafka else consumer_flaws_named
    behaviour = with_flaws(CORRECT, named(settings.flaws))
    store = store_from_url(settings.store_url)
    clock = ServerClock(store, adjustable=settings.test_clock)
    cleanup = CleanupJob(store, clock, retention=behaviour.retention(settings.retention),
                         interval=settings.cleanup_interval)
    events = EventLog()
    worker = Worker(store, clock, settings=settings, behaviour=behaviour, events=events)
    consumer: QueueConsumer | TopicConsumer
    if kafka:
        consumer = TopicConsumer(settings, worker.handle, events,
                                 auto_commit=behaviour.auto_commit)
    else:
        consumer = QueueConsumer(settings, worker.handle, events)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    def health() -> dict[str, Any]:
        return {
            "status": "ok" if consumer.connected else "reconnecting",
            "role": "consumer",
            "broker": settings.broker,
            "pid": os.getpid(),
            "store": store.kind,
            "flaw": " + ".join(settings.flaws) or None,
            "queue": settings.queue,
            "dead_letter_queue": settings.dead_letters,
            "dedup_header": settings.dedup_header,
            "prefetch": 1 if kafka else settings.prefetch,
            **({"group": settings.group, "max_poll_interval": settings.max_poll_interval,
                "session_timeout": settings.session_timeout,
                "dedup_source": settings.dedup_source} if kafka else {}),
            "lease": settings.lease,
            "retention": settings.retention,
            "max_attempts": settings.max_attempts,
            "test_clock": settings.test_clock,
            "test_faults": settings.test_faults,
            "connected": consumer.connected,
            "in_flight": consumer.in_flight,
            "events": events.next_index,
        }

    await store.open()
    try:
        cleanup.start()
        await consumer.start(connect_timeout=settings.connect_timeout)
        events.record("consuming", queue=settings.queue,
                      group=settings.group if kafka else None)
        admin: _AdminServer | None = None
        if settings.admin_port is not None:
            app = consumer_admin_app(store=store, clock=clock, cleanup=cleanup, events=events,
                                     health=health)
            admin = _AdminServer(uvicorn.Config(
                app, host=settings.admin_host, port=settings.admin_port, log_config=None,
                log_level=settings.log_level, access_log=settings.log_level == "debug",
                lifespan="off",
            ))
            serving = asyncio.create_task(admin.serve(), name="admin")
        await stop.wait()
        if admin is not None:
            admin.should_exit = True
            await serving
    finally:
        await consumer.close()
        await cleanup.stop()
        await store.close()


def run_consumer(settings: ConsumerSettings) -> None:
    """Consume until SIGINT or SIGTERM; exit ``STARTUP_FAILED`` when the store or the broker
    cannot be reached at start."""
    logging.basicConfig(level=settings.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if settings.log_level != "debug":
        # The client logs every failed reconnect attempt with a traceback; the consumer says
        # once that it lost the connection, and when it is back (events disconnected and
        # reconnected).
        for library in ("aiormq", "aio_pika", "reference_server.consumer.librdkafka"):
            logging.getLogger(library).setLevel(logging.CRITICAL)
    try:
        asyncio.run(_serve(settings))
    except StoreUnavailable as exc:
        print(f"error: the store cannot be opened: {exc}\n(check --store, and that the "
              "database server is running and accepts this user)", file=sys.stderr)
        raise SystemExit(STARTUP_FAILED) from None
    except BrokerUnreachable as exc:
        where = settings.bootstrap if settings.broker == "kafka" else _redacted(settings.amqp_url)
        print(f"error: the broker at {where} {exc}\n({exc.fix})", file=sys.stderr)
        raise SystemExit(STARTUP_FAILED) from None


def _redacted(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))

"""The harness's AMQP client against a real RabbitMQ, through a real Toxiproxy: copies meant to
arrive together reach the queue together, however late the broker's confirms come back."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import aio_pika
import pytest

from harness.consumer._amqp import AmqpClient, Outgoing, PublishOutcome
from harness.consumer._rabbitmq_broker import through
from harness.services._rabbitmq import RabbitServer
from harness.services._toxiproxy import Toxic, ToxiproxyServer
from tests.reference_server.support import wait_until

COPIES = 4
CONFIRM_WAIT = 5.0


@pytest.fixture
def queue(rabbitmq_server: RabbitServer) -> Iterator[str]:
    name = f"amqp-client-{uuid.uuid4().hex[:8]}"

    async def declare(delete: bool) -> None:
        connection = await aio_pika.connect(rabbitmq_server.url)
        async with connection:
            channel = await connection.channel()
            if delete:
                await channel.queue_delete(name)
            else:
                await channel.declare_queue(name, durable=True)

    asyncio.run(declare(False))
    yield name
    asyncio.run(declare(True))


def test_copies_published_at_once_are_all_queued_before_any_confirm(
        rabbitmq_server: RabbitServer, toxiproxy_server: ToxiproxyServer, queue: str) -> None:
    """With every confirm held back, one publish after another would queue one copy and wait;
    published at once, all copies are on the queue while the publisher still has no confirm."""
    broker = urlsplit(rabbitmq_server.url)
    proxy = toxiproxy_server.client.create_proxy(f"amqp-client-{queue}",
                                                 f"{broker.hostname}:{broker.port}")
    publisher = AmqpClient(through(rabbitmq_server.url, proxy.listen), timeout=CONFIRM_WAIT)
    observer = AmqpClient(rabbitmq_server.url)
    outcomes: list[tuple[PublishOutcome, str | None]] = []
    try:
        publisher.queue_state(queue)  # connected before the confirms are held
        proxy.add_toxic(Toxic("timeout", "downstream", {"timeout": 0}))
        copies = [Outgoing("", queue, b'{"amount": 100}', uuid.uuid4().hex, {"key": "k"},
                           "application/json") for _ in range(COPIES)]
        sending = threading.Thread(
            target=lambda: outcomes.extend(publisher.publish_at_once(copies)), daemon=True)
        sending.start()
        wait_until(lambda: observer.queue_state(queue).ready == COPIES,
                   f"{COPIES} copies on the queue", timeout=CONFIRM_WAIT - 1)
        assert sending.is_alive(), "the publisher returned before the queue held every copy"
        sending.join(CONFIRM_WAIT + 10)
    finally:
        proxy.delete()
        publisher.close()
        observer.close()
    assert outcomes == [("unknown", f"no confirm within {CONFIRM_WAIT:g} s")] * COPIES


def test_each_copy_has_its_own_outcome(rabbitmq_server: RabbitServer, queue: str) -> None:
    """Confirmed copies are confirmed; a copy no queue takes is refused, not lost in the batch."""
    client = AmqpClient(rabbitmq_server.url)
    try:
        good = Outgoing("", queue, b"{}", None, {}, "application/json")
        unroutable = Outgoing("", f"{queue}-nobody", b"{}", None, {}, "application/json")
        outcomes = client.publish_at_once([good, unroutable, good])
        assert client.queue_state(queue).ready == 2
    finally:
        client.close()
    assert outcomes == [
        ("confirmed", None),
        ("refused", f"returned unroutable: no queue is bound to '{queue}-nobody'"),
        ("confirmed", None),
    ]

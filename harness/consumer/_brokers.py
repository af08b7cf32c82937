"""Which broker a consumer target reads from, where that broker comes from, and its adapter.

The one place of the consumer front end that names the brokers: everything else talks to the
port (``_broker.Broker``).  A run's broker is, in order: the one its target file names
(``[broker] url`` or ``bootstrap``); one shared by every run inside a block (``sharing`` for a
test session's own broker; ``shared_broker`` for the matrix's rows, a demo's two runs and the
benches, which starts each kind of broker the first time a run inside the block needs it and
stops it at the block's end); or a throwaway one started for the run and stopped after it
(RabbitMQ: a node from Debian's package; Kafka: a KRaft broker from the jars ``make setup``
fetched, with a proxied link per consumer process).  An address in the environment
(``IDEM_AMQP_URL``, ``IDEM_KAFKA_BOOTSTRAP``) stands in for the throwaway one, as for every
service (harness/services/).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from harness.consumer._broker import Broker
from harness.consumer._target import ConsumerTarget
from harness.services._kafka import ENV_LINKS, KafkaServer, links_from_environment, start_kafka
from harness.services._rabbitmq import RabbitServer, start_rabbitmq
from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["BrokerService", "broker_for", "open_broker", "shared_broker", "sharing"]

#: What a run's broker is reached by: RabbitMQ's URL, or a Kafka server (its links with it).
BrokerService = str | KafkaServer


@dataclass
class _Block:
    """Brokers shared by the runs inside one block: given (``sharing``), or started on first
    need (``shared_broker``) and kept, by kind (a Kafka broker also by the Toxiproxy its links'
    proxies live on)."""

    starts: bool
    services: dict[object, BrokerService] = field(default_factory=dict)
    stack: ExitStack = field(default_factory=ExitStack)
    lock: threading.Lock = field(default_factory=threading.Lock)


#: The blocks open now, the innermost last.
_blocks: list[_Block] = []


@contextmanager
def sharing(server: RabbitServer | KafkaServer) -> Iterator[None]:
    """Every consumer run inside the block whose file names no broker of its own, and whose
    broker is of ``server``'s kind, uses ``server`` (a test session's broker), instead of
    starting one."""
    block = _Block(starts=False)
    if isinstance(server, KafkaServer):
        block.services["kafka"] = server
    else:
        block.services["rabbitmq"] = server.url
    _blocks.append(block)
    try:
        yield
    finally:
        _blocks.remove(block)


@contextmanager
def shared_broker() -> Iterator[None]:
    """One broker of each kind for every consumer run inside the block (the matrix's rows, a
    demo's two runs, a bench's), instead of one each: a broker takes seconds to start.  Each is
    started the first time a run inside the block needs it, and stopped when the block ends."""
    block = _Block(starts=True)
    _blocks.append(block)
    try:
        with block.stack:
            yield
    finally:
        _blocks.remove(block)


def _shared(kind: str, toxiproxy: ToxiproxyServer | None) -> BrokerService | None:
    """The broker of ``kind`` the open blocks share: one given (``sharing``), else one the
    innermost ``shared_broker`` block kept or starts now."""
    for block in reversed(_blocks):  # one given to the runs (a test session's) comes first
        if kind in block.services:
            return block.services[kind]
    for block in reversed(_blocks):
        if not block.starts:
            continue
        slot = (kind, id(toxiproxy)) if kind == "kafka" else kind
        with block.lock:
            if slot not in block.services:
                block.services[slot] = (
                    block.stack.enter_context(start_kafka(
                        toxiproxy=toxiproxy.client if toxiproxy is not None else None))
                    if kind == "kafka" else block.stack.enter_context(start_rabbitmq()).url)
            return block.services[slot]
    return None


@contextmanager
def broker_for(target: ConsumerTarget, *,
               toxiproxy: ToxiproxyServer | None = None) -> Iterator[BrokerService]:
    """The broker for ``target``: its own, the shared one, or a throwaway one for the block
    (a Kafka broker's links get their proxies on ``toxiproxy`` before it starts)."""
    broker = target.broker
    if broker.kind == "kafka":
        if broker.bootstrap is not None:
            yield KafkaServer(broker.bootstrap, origin=f"{target.source or target.name} "
                              "[broker] bootstrap",
                              links=links_from_environment(os.environ.get(ENV_LINKS, "")))
            return
        shared = _shared("kafka", toxiproxy)
        if shared is not None:
            yield shared
            return
        with start_kafka(toxiproxy=toxiproxy.client if toxiproxy is not None
                         else None) as server:
            yield server
        return
    if broker.url is not None:
        yield broker.url
        return
    shared = _shared("rabbitmq", toxiproxy)
    if shared is not None:
        yield shared
        return
    with start_rabbitmq() as rabbit:
        yield rabbit.url


def open_broker(target: ConsumerTarget, service: BrokerService, *, toxiproxy: ToxiproxyServer,
                run_id: str, allow_remote: bool) -> Broker:
    """The adapter for ``target``'s broker, bound to the run ``run_id``."""
    if target.kafka:
        from harness.consumer._kafka_broker import KafkaBroker

        if not isinstance(service, KafkaServer):
            raise TypeError(f"a Kafka target needs a KafkaServer, not {service!r}")
        return KafkaBroker(target, server=service, toxiproxy=toxiproxy, run_id=run_id,
                           allow_remote=allow_remote)
    from harness.consumer._rabbitmq_broker import RabbitBroker

    if not isinstance(service, str):
        raise TypeError(f"a RabbitMQ target needs an AMQP URL, not {service!r}")
    return RabbitBroker(target, url=service, toxiproxy=toxiproxy, run_id=run_id,
                        allow_remote=allow_remote)

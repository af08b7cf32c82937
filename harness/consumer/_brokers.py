"""Which broker a consumer target reads from, where that broker comes from, and its adapter.

The one place of the consumer front end that names the brokers: everything else talks to the
port (``_broker.Broker``).  A run's broker is, in order: the one its target file names
(``[broker] url`` or ``bootstrap``); one shared by every run inside a block (``shared_broker``
for the matrix's rows and the benches, ``sharing`` for a test session's own); or a throwaway one
started for the run and stopped after it (RabbitMQ: a node from Debian's package; Kafka: a
KRaft broker from the jars ``make setup`` fetched, with a proxied link per consumer process).
An address in the environment (``IDEM_AMQP_URL``, ``IDEM_KAFKA_BOOTSTRAP``) stands in for the
throwaway one, as for every service (harness/services/).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from harness.consumer._broker import Broker
from harness.consumer._target import ConsumerTarget
from harness.services._kafka import ENV_LINKS, KafkaServer, links_from_environment, start_kafka
from harness.services._rabbitmq import RabbitServer, start_rabbitmq
from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["BrokerService", "broker_for", "open_broker", "shared_broker", "sharing"]

#: What a run's broker is reached by: RabbitMQ's URL, or a Kafka server (its links with it).
BrokerService = str | KafkaServer

#: Brokers shared by the runs inside a block, the innermost last, by kind.
_shared: dict[str, list[Any]] = {"rabbitmq": [], "kafka": []}


@contextmanager
def sharing(server: RabbitServer | KafkaServer) -> Iterator[None]:
    """Every consumer run inside the block whose file names no broker of its own uses
    ``server`` (a test session's broker), instead of starting one."""
    kind = "kafka" if isinstance(server, KafkaServer) else "rabbitmq"
    _shared[kind].append(server)
    try:
        yield
    finally:
        _shared[kind].remove(server)


@contextmanager
def shared_broker() -> Iterator[RabbitServer]:
    """One RabbitMQ for every consumer run inside the block (the matrix's rows), instead of a
    node each: a node takes seconds to boot."""
    with start_rabbitmq() as server, sharing(server):
        yield server


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
        elif _shared["kafka"]:
            yield _shared["kafka"][-1]
        else:
            with start_kafka(toxiproxy=toxiproxy.client if toxiproxy is not None
                             else None) as server:
                yield server
    elif broker.url is not None:
        yield broker.url
    elif _shared["rabbitmq"]:
        yield _shared["rabbitmq"][-1].url
    else:
        with start_rabbitmq() as server:
            yield server.url


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

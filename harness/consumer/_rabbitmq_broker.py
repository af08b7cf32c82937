"""RabbitMQ behind the broker port: a queue, a Toxiproxy proxy per consumer, publisher confirms.

The harness publishes and inspects on a direct AMQP connection (``_amqp.AmqpClient``); each
consumer reaches the broker through a proxy of its own (``{amqp_url}`` with the proxy's address),
so a fault meant for one consumer's connection never touches the harness's evidence.  The queue
is the consumer's to declare; settling is read from the consumers' events feeds
(``_settling.unsettled``), since a passive declare counts ready messages, not acks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from harness._errors import ServiceError, UsageError
from harness._history import Event
from harness._target import render_template
from harness.consumer._amqp import AmqpClient, Outgoing
from harness.consumer._broker import FEED_KINDS, Published, QueueState, Received
from harness.consumer._messages import MessageParts
from harness.consumer._settling import unsettled
from harness.consumer._target import ConsumerTarget
from harness.services._network import require_loopback
from harness.services._toxiproxy import ToxiproxyProxy, ToxiproxyServer

__all__ = ["RabbitBroker", "through"]


def through(url: str, listen: str) -> str:
    """``url`` with its host and port replaced by a proxy's ``listen`` address."""
    parts = urlsplit(url)
    credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=credentials + listen))


@dataclass(frozen=True)
class _Link:
    proxy: ToxiproxyProxy
    values: Mapping[str, str]


class _AmqpPublisher:
    """Publishes to the run's queue on one AMQP connection, with confirms."""

    def __init__(self, client: AmqpClient, exchange: str, routing_key: str) -> None:
        self.client = client
        self._exchange = exchange
        self._routing_key = routing_key

    def publish(self, messages: Sequence[MessageParts], *, spread: bool = False,
                timeout: float | None = None) -> list[Published]:
        outgoing = [Outgoing(self._exchange, self._routing_key, m.body, m.message_id,
                             m.headers, m.content_type, m.properties) for m in messages]
        if len(outgoing) == 1:
            outcomes = [self.client.publish(outgoing[0], timeout=timeout)]
        else:
            outcomes = self.client.publish_at_once(outgoing, timeout=timeout)
        return [Published(outcome, why) for outcome, why in outcomes]

    def close(self) -> None:
        self.client.close()


class RabbitBroker:
    """A run's queue on RabbitMQ (``url``), its consumers' proxies on ``toxiproxy``."""

    title = "RabbitMQ"

    def __init__(self, target: ConsumerTarget, *, url: str, toxiproxy: ToxiproxyServer,
                 run_id: str, allow_remote: bool) -> None:
        self.target = target
        self.url = url
        self.toxiproxy = toxiproxy
        self.run_id = run_id
        self.allow_remote = allow_remote
        self.queue = str(render_template(target.queue.name, {"run": run_id}))
        values = {"queue": self.queue, "run": run_id}
        self.exchange = str(render_template(target.queue.exchange, values))
        self.routing_key = str(render_template(target.queue.routing_key, values))
        dlq = target.promises.dead_letter_queue
        self.dead_letters = str(render_template(dlq, values)) if dlq else None
        self.amqp = AmqpClient(url)
        self._own = _AmqpPublisher(self.amqp, self.exchange, self.routing_key)
        self._producer_proxy: ToxiproxyProxy | None = None

    @property
    def values(self) -> Mapping[str, Any]:
        return {"queue": self.queue, "dead_letter_queue": self.dead_letters or ""}

    def prepare(self) -> None:
        """The queue is the consumer's to declare: only check the broker is allowed."""
        require_loopback(self.url, allow_remote=self.allow_remote)

    def _upstream(self) -> str:
        broker = urlsplit(self.url)
        return f"{broker.hostname}:{broker.port or 5672}"

    def open_link(self, name: str) -> _Link:
        proxy = self.toxiproxy.client.create_proxy(name, self._upstream())
        return _Link(proxy, {"amqp_url": through(self.url, proxy.listen)})

    def close_link(self, link: Any) -> None:
        with suppress(ServiceError):
            link.proxy.delete()

    def publish(self, messages: Sequence[MessageParts], *, spread: bool = False,
                timeout: float | None = None) -> list[Published]:
        return self._own.publish(messages, spread=spread, timeout=timeout)

    def losing_publisher(self) -> tuple[ToxiproxyProxy, _AmqpPublisher]:
        """A connection of its own through the producer's proxy (made once), connected before
        the nemesis holds what the broker sends back."""
        if self._producer_proxy is None:
            self._producer_proxy = self.toxiproxy.client.create_proxy(
                f"idem-{self.run_id}-producer", self._upstream())
        client = AmqpClient(through(self.url, self._producer_proxy.listen), timeout=5.0)
        try:
            client.queue_state(self.queue)  # connect before the fault
        except BaseException:
            client.close()
            raise
        return self._producer_proxy, _AmqpPublisher(client, self.exchange, self.routing_key)

    def state(self, name: str | None = None) -> QueueState:
        return self.amqp.queue_state(name or self.queue)

    def observation(self) -> dict[str, Any]:
        state = self.amqp.queue_state(self.queue)
        return {"ready": state.ready, "consumers": state.consumers}

    def take_all(self, name: str) -> list[Received]:
        return self.amqp.take_all(name)

    def unsettled(self, events: Sequence[Event], confirmed: Mapping[str, int],
                  live: Iterable[tuple[str, int | None]]) -> dict[str, str]:
        return unsettled(events, confirmed, live)

    def feed_kind(self, item: Mapping[str, Any]) -> str | None:
        kind = str(item.get("type", ""))
        return kind if kind in FEED_KINDS else None

    def rewind(self, offsets: Mapping[int, int] | None = None) -> dict[int, int]:
        raise UsageError("a RabbitMQ queue has no offsets to set back: a scenario that "
                         "rewinds needs a Kafka consumer")

    def where(self) -> str:
        return f"queue {self.queue!r}"

    def readiness_fix(self) -> str:
        return ("check that the consumer reads the queue it is given ({queue}) from the broker "
                "at {amqp_url}")

    def close(self) -> None:
        if self._producer_proxy is not None:
            with suppress(ServiceError):
                self._producer_proxy.delete()
            self._producer_proxy = None
        self.amqp.close()

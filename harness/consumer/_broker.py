"""The broker as a port of the consumer front end: what the harness asks of any broker.

A consumer target reads from RabbitMQ or from Kafka, and the rest of the front end (the
deployment, the scenarios' context, the events feed, the settling, the explorer) must not care
which: each broker is an adapter behind this interface (``_rabbitmq_broker.py``,
``_kafka_broker.py``; ``_brokers.py`` picks one for a target).  What an adapter provides:

- **names**: where the harness publishes (``queue``: a queue, or a topic), where the consumer
  promises to put what it gives up on (``dead_letters``), and the placeholders a start command
  and a message template may use (``values``);
- **links**: one per consumer process (``open_link``), each through a Toxiproxy proxy the
  nemesis may cut, stall or hold, with the address to hand the process (``BrokerLink.values``);
- **publishing with confirms** (``publish``): every message out before any confirm is awaited,
  each ``confirmed``, ``refused`` or ``unknown``, and where the broker put it when it says; and a
  publisher whose confirms the nemesis can hold (``losing_publisher``);
- **inspecting** what is left (``state``: messages not yet settled with the broker and the
  consumers it counts), taking what is left and what was dead-lettered (``take_all``), and
  whether a key's messages have settled (``unsettled``);
- **the events feed's words**: which of a consumer's reported event types the history keeps,
  and under which name (``feed_kind``);
- optional moves a broker may offer, gated by the target's capabilities: setting a group's
  offsets back (``rewind``).

Everything here is plain data or a protocol; the adapters import the broker's client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from harness._history import Event
from harness.consumer._messages import MessageParts
from harness.services._toxiproxy import ToxiproxyProxy

__all__ = ["FEED_KINDS", "Broker", "BrokerLink", "PublishOutcome", "Published", "Publisher",
           "QueueState", "Received"]

PublishOutcome = Literal["confirmed", "refused", "unknown"]
#: The event types the history keeps from any consumer's feed, under their own names; a broker
#: may keep more (``Broker.feed_kind``).
FEED_KINDS = frozenset({"deliver", "claim", "wait", "pause", "commit", "ack", "ack-lost", "nack",
                        "dead-letter", "poison", "work-failed", "fenced", "store-unavailable"})


@dataclass(frozen=True, slots=True)
class QueueState:
    """What the broker says about a queue (or topic): messages not yet settled (ready in a
    queue; on Kafka, not yet committed past by the group) and consumers it counts.  ``exists``
    is False before anyone declared it."""

    exists: bool
    ready: int = 0
    consumers: int = 0
    #: Consumers the broker still knows, consuming or not (a Kafka group's members during a
    #: rebalance, before a dead one's session has run out); None: the same as ``consumers``.
    known: int | None = None

    @property
    def members(self) -> int:
        """Every consumer the broker still knows: one it has dropped is not among them."""
        return self.consumers if self.known is None else self.known


@dataclass(frozen=True, slots=True)
class Published:
    """One publish's outcome: ``confirmed`` (the broker has it), ``refused`` (certainly not
    queued) or ``unknown`` (no confirm: it may be queued), why when not confirmed, and where
    the broker put it when it says (a Kafka record's partition and offset)."""

    outcome: PublishOutcome
    why: str | None = None
    where: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Received:
    """A message the harness took off a queue or topic (the dead letters, leftovers)."""

    message_id: str | None
    headers: Mapping[str, Any]
    body: bytes
    redelivered: bool
    #: A Kafka record's key, as text.
    record_key: str | None = None
    #: Where a Kafka record was (``topic/partition/offset``): a record has no message id.
    place: str | None = None


class BrokerLink(Protocol):
    """One consumer process's way to the broker: a proxy of its own, and what its start
    command is given to reach the broker through it (``{amqp_url}``, ``{kafka_bootstrap}``)."""

    @property
    def proxy(self) -> ToxiproxyProxy: ...

    @property
    def values(self) -> Mapping[str, str]: ...


class Publisher(Protocol):
    """What publishes with confirms: the broker's own connection, or a losing publisher."""

    def publish(self, messages: Sequence[MessageParts], *, spread: bool = False,
                timeout: float | None = None) -> list[Published]:
        """Publish every message before awaiting any confirm, then each one's outcome, in
        order.  ``spread``: copies meant for several consumers at once go where several can
        take them together (Kafka: partitions in turn)."""
        ...

    def close(self) -> None: ...


class Broker(Publisher, Protocol):
    """One run's broker, bound to the run's queue (or topic): the port every consumer module
    talks to."""

    #: What reports call the broker (a diagram's lane).
    title: str
    #: Where the harness publishes, as the history names it (a queue, or a topic).
    queue: str
    #: Where the consumer promises to put what it gives up on (None: it promises nowhere).
    dead_letters: str | None

    @property
    def values(self) -> Mapping[str, Any]:
        """Placeholders for start commands and message templates (``{queue}``,
        ``{topic}``, ``{group}``...)."""
        ...

    def prepare(self) -> None:
        """Make what the consumer reads from, where the harness makes it (Kafka's topics)."""
        ...

    def open_link(self, name: str) -> BrokerLink:
        """A link for one consumer process (``name``: its proxy's name)."""
        ...

    def close_link(self, link: BrokerLink) -> None: ...

    def losing_publisher(self) -> tuple[ToxiproxyProxy, Publisher]:
        """A publisher connected through a proxy of its own, whose confirms the nemesis can
        hold (``ConsumerNemesis.producer_fault``): connected already, so a held confirm is the
        only thing that goes missing."""
        ...

    def state(self, name: str | None = None) -> QueueState:
        """The queue's state (``name``: another queue, such as the dead letters)."""
        ...

    def observation(self) -> dict[str, Any]:
        """What a scenario records of the queue just before it acts (``observe``)."""
        ...

    def take_all(self, name: str) -> list[Received]:
        """Take what is left in ``name`` (the queue, or the dead letters) off it."""
        ...

    def unsettled(self, events: Sequence[Event], confirmed: Mapping[str, int],
                  live: Iterable[tuple[str, int | None]]) -> dict[str, str]:
        """The keys of ``confirmed`` whose messages have not settled, each with why."""
        ...

    def feed_kind(self, item: Mapping[str, Any]) -> str | None:
        """Under which name the history keeps an event a consumer reported (None: not kept)."""
        ...

    def rewind(self, offsets: Mapping[int, int] | None = None) -> dict[int, int]:
        """Set the consumers' place in the queue back (Kafka: the group's committed offsets;
        None: to the start), with every consumer stopped; the offsets set."""
        ...

    def where(self) -> str:
        """The queue in words, for messages (``queue 'charges-1'``)."""
        ...

    def readiness_fix(self) -> str:
        """What to check when consumers never show up on the queue."""
        ...

"""Everything a consumer process is told at start, in one frozen value.

The CLI fills it from options; tests may build it directly.  Times are seconds.  One value for
both brokers: with ``broker = "kafka"`` the queue is a topic read in consumer group ``group``
from ``bootstrap`` (``amqp_url`` and ``prefetch`` unused), and the dead-letter queue a topic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ConsumerSettings"]


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    amqp_url: str
    queue: str
    store_url: str
    dead_letter_queue: str = ""
    """Where poison goes; ``""`` means ``QUEUE.dead``."""
    dedup_header: str = "Idempotency-Key"
    prefetch: int = 8
    lease: float = 30.0
    retention: float = 86400.0
    max_attempts: int = 5
    requeue_delay: float = 0.25
    cleanup_interval: float = 60.0
    work_delay: float = 0.0
    heartbeat: float = 5.0
    connect_timeout: float = 15.0
    """How long the first connection to the broker is retried before the process gives up."""
    admin_host: str = "127.0.0.1"
    admin_port: int | None = None
    test_clock: bool = False
    test_faults: bool = False
    flaws: tuple[str, ...] = ()  # named flaws switched on together (``flaws.combine``)
    log_level: str = "info"
    broker: Literal["rabbitmq", "kafka"] = "rabbitmq"
    bootstrap: str = ""
    """Kafka: the bootstrap address (``127.0.0.1:9092``; a harness gives a proxied link's)."""
    group: str = ""
    """Kafka: the consumer group."""
    dedup_source: Literal["header", "key", "body"] = "header"
    """Where the client's dedup key is: ``dedup_header``, the Kafka record's key, or the JSON
    body's ``dedup_field``."""
    dedup_field: str = "key"
    max_poll_interval: float = 300.0
    """Kafka: a member that does not poll for this long is dropped from its group (a job that
    pauses longer makes it a zombie: its partition goes to another member)."""
    session_timeout: float = 10.0
    """Kafka: a member whose heartbeats stop for this long (killed, cut off) is dropped."""
    auto_commit_interval: float = 0.1
    """Kafka, with the ``auto-commit-before-work`` flaw: how often offsets are committed."""

    @property
    def dead_letters(self) -> str:
        return self.dead_letter_queue or f"{self.queue}.dead"

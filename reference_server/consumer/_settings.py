"""Everything a consumer process is told at start, in one frozen value.

The CLI fills it from options; tests may build it directly.  Times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

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

    @property
    def dead_letters(self) -> str:
        return self.dead_letter_queue or f"{self.queue}.dead"

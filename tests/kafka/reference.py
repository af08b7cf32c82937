"""The reference Kafka consumer as a process of its own, and a producer of charge records.

The process is the RabbitMQ tests' ``ConsumerProcess`` (the same admin routes and events feed,
waited on with ``wait_for`` and ``count``), started with ``consume-kafka`` instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.services._kafka import KafkaServer
from harness.services._kafka_client import Delivered, NotDelivered, Outgoing
from harness.services._network import free_port
from harness.services._processes import ManagedProcess
from tests.reference_consumer.support import CHARGE, ConsumerProcess

__all__ = ["KafkaConsumerProcess", "produce"]

#: Short enough that a killed member's partitions move on within seconds, long enough that a
#: busy machine's heartbeats keep a live one.
SESSION = "2s"


class KafkaConsumerProcess(ConsumerProcess):
    """``python -m reference_server consume-kafka`` with an admin port."""

    def __init__(self, bootstrap: str, topic: str, group: str, *, store: str, log_dir: Path,
                 options: Sequence[str] = ()) -> None:
        self.port = free_port()
        self.queue = topic
        self.group = group
        command = [sys.executable, "-m", "reference_server", "consume-kafka",
                   "--bootstrap", bootstrap, "--topic", topic, "--group", group,
                   "--store", store, "--admin-port", str(self.port), "--requeue-delay", "50ms",
                   "--session-timeout", SESSION, *options]
        self._process = ManagedProcess(
            f"kafka consumer {topic}", command,
            log_path=log_dir / f"{topic}-{self.port}.log",
            ready_url=f"{self.base}/_admin/health", start_timeout=60.0)


def produce(server: KafkaServer, topic: str, records: Sequence[Mapping[str, Any]]
            ) -> list[Delivered]:
    """Produce each record (``key``: the dedup key, sent as the Idempotency-Key header and as
    the record's key; ``body``: a JSON value or bytes; ``headers``; ``partition``), all before
    any acknowledgement is awaited; each must be acknowledged."""
    messages = []
    for spec in records:
        body = spec.get("body", CHARGE)
        headers = [(name, str(value).encode()) for name, value in spec.get("headers", {}).items()]
        key = spec.get("key")
        if key is not None:
            headers.insert(0, ("Idempotency-Key", key.encode()))
        messages.append(Outgoing(
            body if isinstance(body, bytes) else json.dumps(body).encode(),
            key=spec.get("record_key", key).encode() if spec.get("record_key", key) else None,
            headers=tuple(headers), partition=spec.get("partition")))
    with server.producer() as producer:
        outcomes = producer.send_all(topic, messages)
    delivered = [outcome for outcome in outcomes if isinstance(outcome, Delivered)]
    assert len(delivered) == len(outcomes), [o for o in outcomes if isinstance(o, NotDelivered)]
    return delivered

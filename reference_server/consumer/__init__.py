"""The reference consumer: charge messages from a RabbitMQ queue, deduplicated by their key.

The seed's last paragraph applied: the message's dedup key (a header, or its message id) is the
idempotency key, claimed in the store the HTTP server uses and committed as done in the same
transaction as the charge; the message is acked only after that commit.  It shares the HTTP
server's stores, ledger, clock, cleanup job and admin routes, so the harness counts its effects
and moves its clock the same way.

Public surface: ``ConsumerSettings``, ``run_consumer``, ``CONSUMER_FLAWS``, ``ConsumerFlaw``,
``get_consumer_flaw``, ``UnknownConsumerFlaw``, ``ConsumerBehaviour``, and the click command
``reference_server.consumer.cli.consume`` (``python -m reference_server consume``).
"""

from reference_server.consumer._behaviour import ConsumerBehaviour
from reference_server.consumer._running import run_consumer
from reference_server.consumer._settings import ConsumerSettings
from reference_server.consumer.flaws import (
    CONSUMER_FLAWS,
    ConsumerFlaw,
    UnknownConsumerFlaw,
    get_consumer_flaw,
)

__all__ = [
    "CONSUMER_FLAWS",
    "ConsumerBehaviour",
    "ConsumerFlaw",
    "ConsumerSettings",
    "UnknownConsumerFlaw",
    "get_consumer_flaw",
    "run_consumer",
]

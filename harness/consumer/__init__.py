"""Queue consumers: the same harness for background workers, on a real RabbitMQ (issue 16) or
Kafka (issue 40).

A consumer target is driven through a real broker: the harness publishes with publisher
confirms (on Kafka, produce acknowledgements), the consumer reaches the broker through a
Toxiproxy proxy the nemesis may cut or stall, and the consumer process may be killed and
restarted.  Everything is recorded in the
same history and judged by the same checker as an HTTP run (docs/consumers.md).

This package is the queue consumer's front end: the engine reaches it only through
``_front.py`` (a ``harness._front.Front``, found by the registry).  The names below are its
public face, for scenarios and for code that drives consumers without the CLI; inside the
harness, modules import the module that defines a name, never this face.
"""

from harness.consumer._context import SETTLE, ConsumerContext
from harness.consumer._reference import reference_consumer_target, run_reference_consumer
from harness.consumer._runner import run_target, shared_broker
from harness.consumer._scenario import (
    ConsumerScenario,
    consumer_scenario,
    http_only,
    pause_before_commit,
)
from harness.consumer._target import ConsumerTarget, is_consumer

__all__ = ["SETTLE", "ConsumerContext", "ConsumerScenario", "ConsumerTarget", "consumer_scenario",
           "http_only", "is_consumer", "pause_before_commit", "reference_consumer_target",
           "run_reference_consumer",
           "run_target", "shared_broker"]

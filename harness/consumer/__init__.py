"""Queue consumers: the same harness for background workers, on a real RabbitMQ (issue 16).

A consumer target is driven through a real broker: the harness publishes with publisher
confirms, the consumer reaches the broker through a Toxiproxy proxy the nemesis may cut or
stall, and the consumer process may be killed and restarted.  Everything is recorded in the
same history and judged by the same checker as an HTTP run (docs/consumers.md).

The names below are resolved on first use (PEP 562), as ``harness``'s are: loading a target
file imports ``_target.py`` of this package, and that must not start the consumer's runner, its
reports and everything they import (which import the target loader back).  Inside the engine,
modules import the module that defines a name, never this face.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.consumer._context import SETTLE, ConsumerContext
    from harness.consumer._reference import reference_consumer_target, run_reference_consumer
    from harness.consumer._runner import run_target, shared_broker
    from harness.consumer._scenario import ConsumerScenario, consumer_scenario, http_only
    from harness.consumer._target import ConsumerTarget, is_consumer

_EXPORTS: dict[str, str] = {
    "SETTLE": "harness.consumer._context",
    "ConsumerContext": "harness.consumer._context",
    "reference_consumer_target": "harness.consumer._reference",
    "run_reference_consumer": "harness.consumer._reference",
    "run_target": "harness.consumer._runner",
    "shared_broker": "harness.consumer._runner",
    "ConsumerScenario": "harness.consumer._scenario",
    "consumer_scenario": "harness.consumer._scenario",
    "http_only": "harness.consumer._scenario",
    "ConsumerTarget": "harness.consumer._target",
    "is_consumer": "harness.consumer._target",
}

__all__ = ["SETTLE", "ConsumerContext", "ConsumerScenario", "ConsumerTarget", "consumer_scenario",
           "http_only", "is_consumer", "reference_consumer_target", "run_reference_consumer",
           "run_target", "shared_broker"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.consumer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

"""The explorer for queue consumers: what differs from exploring an HTTP service.

Hypothesis draws stories of publishes, copies, republishes under a new message id, lost acks,
cut and stalled connections, kills and restarts, clock jumps, poison messages and failing jobs
against a consumer on a real RabbitMQ; the same checker judges the same history after every
step and once the queue has settled, and a failing story is shrunk, printed, saved and replayed
as an HTTP one is (docs/consumers.md, "Exploring a consumer").  Only what differs from an HTTP
service lives here: the actions, the planner, the machine, the world, the session and the front
end; the rest is ``harness.explore``'s.

The names below are resolved on first use (PEP 562): a story file names consumer actions
(``_actions.py``), and reading one must not import the front end, which imports the story
module back.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.explore.consumer._actions import ConsumerAction
    from harness.explore.consumer._front import CONSUMER, ConsumerFront

_EXPORTS: dict[str, str] = {
    "ConsumerAction": "harness.explore.consumer._actions",
    "CONSUMER": "harness.explore.consumer._front",
    "ConsumerFront": "harness.explore.consumer._front",
}

__all__ = ["CONSUMER", "ConsumerAction", "ConsumerFront"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.explore.consumer' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value

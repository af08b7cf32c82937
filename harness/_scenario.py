"""What a scenario is: a named story the catalog holds, and whether it can run against a target.

A scenario is a generator in Jepsen's sense: it decides what happens when (requests, retries,
faults, clock jumps) and asserts nothing.  It acts only through the context its front end makes
for it (an HTTP service's ``harness/http/_context.py``, a queue consumer's
``harness/consumer/_context.py``), which records everything into the history, so every scenario
runs against any target of its kind, or says why it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness._errors import HarnessError
from harness._front import DEFAULT_KIND
from harness._target import Target

__all__ = ["CAPABILITY_HINTS", "NotApplicable", "Scenario", "missing_capability"]

#: Why a capability is missing, in the words of the target file.
CAPABILITY_HINTS = {
    "clock": "a clock the harness can move ([clock] kind = \"faketime\" for a target it "
             "starts, or a clock hook, [hooks.clock])",
    "crash": "a crash hook ([hooks.crash]) and a restartable [start]",
    "restart": "a [start] table with restartable = true",
    "slow": "a slow-handler hook ([hooks.slow])",
    "handler-error": "a handler fault ([hooks.handler_error] or [[hooks.handler_errors]])",
    "store-size": "a key-store size hook ([hooks.store_size])",
    "cleanup": "a cleanup hook ([hooks.cleanup])",
    "tenants": "a [tenant] table saying how tenants are expressed",
    "retention": "a promised retention (promises.retention)",
    "lease": "a promised lease (promises.lease)",
    "store-proxy": "a [store_proxy] through which the target reaches its database",
    "instances": "start.shared_state = true (several processes share one store)",
    "keyless-total": "keyless charges counted as a difference of totals ([effects.keyless] "
                     "how = \"total\")",
}


def missing_capability(target: Target, capability: str) -> str:
    """Why ``target`` cannot do ``capability``, and how to give it that, in the user's terms."""
    enable = target.enable_hints.get(capability)
    if enable:
        return f"target {target.name} {enable}"
    return f"target {target.name} lacks {CAPABILITY_HINTS.get(capability, capability)}"


class NotApplicable(HarnessError):
    """Raised by a scenario that found, once running, that its precondition cannot happen on
    this target (the store proxy saw no write to strike after): the outcome is n/a with this
    reason, never a pass."""


@dataclass(frozen=True)
class Scenario:
    """One named story.  ``plan`` is its steps in words, faults included, for ``explain``.
    ``run`` drives the context an HTTP service's front end makes (``ScenarioContext``); a
    queue consumer's scenario drives its own (``harness/consumer/_scenario.py``)."""

    #: The kind of target it plays (``harness._front``); another kind's says why it cannot.
    kind: ClassVar[str] = DEFAULT_KIND
    name: str
    summary: str
    story: str
    properties: tuple[str, ...]
    plan: tuple[str, ...]
    run: Callable[[Any], None]
    needs: frozenset[str] = field(default_factory=frozenset)
    #: Capabilities it uses when the target offers them, without needing them: with ``needs``
    #: they say whether it changes the target for scenarios running beside it
    #: (``harness/http/_parallel.py``).
    uses: frozenset[str] = field(default_factory=frozenset)
    applies: Callable[[Target], str | None] = field(default=lambda target: None)
    #: Roughly how long it takes against a target that answers at once (the reference server):
    #: ``--jobs`` starts the longest first, so that no long scenario begins last and runs on
    #: alone while the others are done.  Only the order depends on it, never a verdict.
    expected_seconds: float = 1.0

    def not_applicable(self, target: Target, *,
                       unavailable: Mapping[str, str] | None = None) -> str | None:
        """Why this scenario cannot run against ``target``, or None when it can.
        ``unavailable`` names capabilities the target file declares that turned out not to
        work, with why (a clock libfaketime could not move)."""
        lost = sorted(self.needs & (unavailable or {}).keys())
        if lost:
            return "; ".join((unavailable or {})[m] for m in lost)
        missing = sorted(self.needs - target.capabilities())
        if missing:
            return "; ".join(missing_capability(target, m) for m in missing)
        return self.applies(target)

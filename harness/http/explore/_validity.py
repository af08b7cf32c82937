"""Whether an HTTP story's actions can run, in this order, against a target.

A replay may aim a story at another target, and the last pass of shrinking drops steps: either
can leave a step that names an operation no earlier step made, heals a fault that is not on, or
needs a hook the target lacks.  Each problem is said with what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness._scenario import missing_capability
from harness._target import Target
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._validity import toggled
from harness.http._nemesis import FAULTS
from harness.http.explore._actions import (
    Action,
    AfterWriteFault,
    Burst,
    BurstAgain,
    Crash,
    HandlerFault,
    HostileBody,
    Keyless,
    NewRequest,
    Overlap,
    Retry,
    Reuse,
    Slow,
)

__all__ = ["problems_with"]


def _needs(action: Action) -> str | None:
    if isinstance(action, Clock):
        return "clock"
    if isinstance(action, Crash):
        return "crash"
    if isinstance(action, Slow):
        return "slow"
    if isinstance(action, HandlerFault):
        return "handler-error"
    if isinstance(action, AfterWriteFault):
        return "store-proxy"
    return None


def problems_with(actions: Sequence[Action], target: Target) -> list[str]:
    """Everything that keeps ``actions`` from running against ``target``, each with its fix."""
    problems: list[str] = []
    capabilities = target.capabilities()
    operations: set[str] = set()
    keys: set[str] = set()
    faults_on: set[str] = set()
    for number, action in enumerate(actions, start=1):
        where = f"step {number} ({action.text()})"
        needed = _needs(action)
        if needed is not None and needed not in capabilities:
            problems.append(f"{where}: {missing_capability(target, needed)}")
        if isinstance(action, Crash) and target.hooks.crash is not None:
            points = list(target.hooks.crash.points) if target.hooks.crash.header else [
                "in-flight"]
            if action.point not in points:
                problems.append(f"{where}: the crash hook has no point {action.point!r}; it "
                                f"has {', '.join(points)}")
        if isinstance(action, Reuse) and action.change == "operation" and action.operation not in {
                o.label for o in target.sharing_keys_with(target.endpoint)}:
            problems.append(f"{where} reuses the key on operation {action.operation!r}, which "
                            f"target {target.name} does not declare in the key space of "
                            f"{target.endpoint.label}")
        if isinstance(action, HandlerFault) and action.fault not in {
                f.name for f in target.hooks.handler_faults}:
            problems.append(f"{where}: target {target.name} declares no handler fault "
                            f"{action.fault!r} ([[hooks.handler_errors]] names)")
        if isinstance(action, NewRequest | Burst | Keyless | Crash | Slow | HostileBody
                      | Overlap | HandlerFault | AfterWriteFault):
            if action.tenant != "a" and "tenants" not in capabilities:
                problems.append(f"{where} uses a second tenant: "
                                f"{missing_capability(target, 'tenants')}")
            if not isinstance(action, Keyless):
                plan = action.key
                if plan.shape is None and plan.name not in keys:
                    problems.append(f"{where} uses key {plan.name} before it is made")
                if plan.of is not None and plan.of not in keys:
                    problems.append(f"{where} derives a key from {plan.of} before it is made")
                keys.add(plan.name)
                if not plan.hostile and not isinstance(action, HostileBody):
                    operations.add(action.id)
        if isinstance(action, Retry | Reuse | BurstAgain) and action.id not in operations:
            problems.append(f"{where} names operation {action.id}, which no earlier step made")
        if isinstance(action, FaultOn | FaultOff):
            fault = FAULTS.get(action.fault)
            if fault is None:
                problems.append(f"{where}: unknown fault {action.fault!r}; known faults: "
                                f"{', '.join(FAULTS)}")
            elif fault.where == "store" and "store-proxy" not in capabilities:
                problems.append(f"{where}: {missing_capability(target, 'store-proxy')}")
            problems += toggled(action, faults_on, where)
    return problems

"""Whether a consumer story's actions can run, in this order, against a consumer target.

A replay may aim a story at another consumer, and the last pass of shrinking drops steps:
either can leave a step that republishes a job no earlier step made, heals a fault that is not
on, or needs what the target lacks (a clock, restarts, a pause hook, a poison message, a
declared work failure).  Each problem is said with what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness._target import Target
from harness.consumer._scenario import CONSUMER_CAPABILITY_HINTS
from harness.consumer._target import ConsumerTarget
from harness.consumer.explore._actions import (
    CONSUMER_FAULT_NAMES,
    ConsumerAction,
    Copies,
    FailingJob,
    Kill,
    LostAck,
    Poison,
    Publish,
    Rebalance,
    Republish,
    Restart,
    Rewind,
    StallMidJob,
)
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._validity import toggled

__all__ = ["problems_with"]


def _needs(action: ConsumerAction) -> set[str]:
    match action:
        case Clock():
            return {"clock"}
        case Republish():
            return {"republish"}
        case Restart() | LostAck(then="kill"):
            return {"restart"}
        case Kill():
            return {"restart"} | ({"pause-before-work"} if action.key is not None else set())
        case StallMidJob():
            return {"instances", "pause-before-work"}
        case Rebalance():
            return {"instances", "pause-before-work", "poll-interval"}
        case Rewind():
            return {"offsets", "restart"}
        case Poison():
            return {"poison"}
    return set()


def problems_with(actions: Sequence[ConsumerAction], target: Target) -> list[str]:
    """Everything that keeps ``actions`` from running against ``target``, each with its fix."""
    if not isinstance(target, ConsumerTarget):
        return [f"target {target.name} is not a queue consumer: a consumer's story replays "
                "against a consumer target (kind = \"consumer\")"]
    problems: list[str] = []
    capabilities = target.capabilities()
    jobs: set[str] = set()
    never_run: set[str] = set()  # jobs whose key may never have an effect
    faults_on: set[str] = set()
    for number, action in enumerate(actions, start=1):
        where = f"step {number} ({action.text()})"
        missing = sorted(_needs(action) - capabilities)
        if missing:
            problems.append(f"{where}: target {target.name} lacks "
                            + "; ".join(CONSUMER_CAPABILITY_HINTS.get(m, m) for m in missing))
        if isinstance(action, StallMidJob | Rebalance) and target.hooks.events is None:
            problems.append(f"{where}: target {target.name} has no events feed ([hooks] "
                            "events), so the consumer holding the job cannot be told")
        if isinstance(action, FailingJob) and action.failure not in {
                f.name for f in target.hooks.work_failures}:
            problems.append(f"{where}: target {target.name} declares no work failure "
                            f"{action.failure!r} ([[hooks.work_failures]] names)")
        if isinstance(action, LostAck) and not ({"ack-hold", "pause-before-ack"} & capabilities):
            problems.append(f"{where}: target {target.name} lacks "
                            + CONSUMER_CAPABILITY_HINTS["pause-before-ack"]
                            + ": on its broker a lost ack is met by a pause after the work")
        if isinstance(action, Publish | Copies | FailingJob | LostAck | StallMidJob | Kill
                      | Rebalance) and action.id is not None and action.id not in never_run:
            jobs.add(action.id)
        if isinstance(action, Poison) or (isinstance(action, FailingJob) and any(
                f.name == action.failure and f.deliveries == "every"
                for f in target.hooks.work_failures)):
            never_run.add(action.id)
        if isinstance(action, Republish) and action.id in never_run:
            problems.append(f"{where} republishes job {action.id}, whose key may never have an "
                            "effect (a poison message, or a job failing on every delivery): "
                            "its republished job would be taken for a poison message's effect")
        elif isinstance(action, Republish) and action.id not in jobs:
            problems.append(f"{where} republishes job {action.id}, which no earlier step made")
        if isinstance(action, Rewind) and action.id not in jobs:
            problems.append(f"{where} rewinds to job {action.id}, which no earlier step made")
        if isinstance(action, FaultOn | FaultOff):
            if action.fault not in CONSUMER_FAULT_NAMES:
                problems.append(f"{where}: unknown consumer fault {action.fault!r}; a story "
                                f"switches on {', '.join(CONSUMER_FAULT_NAMES)}")
            problems += toggled(action, faults_on, where)
    return problems

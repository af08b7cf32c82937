"""The job's work fails: once before the work, once after it, and on every delivery."""

from __future__ import annotations

from harness import Target
from harness.consumer import SETTLE, ConsumerContext, ConsumerTarget, consumer_scenario


def drive(ctx: ConsumerContext) -> None:
    hooks, promises = ctx.target.hooks, ctx.target.promises
    for when in ("before-work", "after-work"):
        if hooks.work_failure(when, "first") is not None:
            ctx.publish(ctx.new_key(), label=f"fails-once:{when}", failure=(when, "first"))
    gives_up = promises.on_failure == "dead-letter" or promises.max_attempts is not None
    if hooks.work_failure("before-work", "every") is not None and gives_up:
        ctx.publish(ctx.new_key(), label="fails-always", failure=("before-work", "every"))
    retries = (promises.retry_delay or 0.0) * (promises.max_attempts or 1)
    ctx.drain(timeout=SETTLE + retries)


def _declared(target: Target) -> str | None:
    assert isinstance(target, ConsumerTarget)
    if not any(f.deliveries == "first" for f in target.hooks.work_failures) and not (
            target.promises.max_attempts or target.promises.on_failure == "dead-letter"):
        return (f"target {target.name} declares only failures on every delivery and no "
                "max_attempts: such a job would be retried for ever")
    return None


SCENARIO = consumer_scenario(
    name="work-failure",
    summary="a job that fails once (before the work, after it) still ends with one charge; one "
            "that always fails is dead-lettered after the promised attempts",
    story=(
        "Work fails: the payment provider times out, a database deadlock, a deploy restarts a "
        "dependency. A consumer retries as it promises: requeues the message, republishes it "
        "after a delay, or dead-letters it after a few attempts. A job that failed before its "
        "work must still be done exactly once; one that failed after its work committed must "
        "not run again; one that always fails must end in the dead-letter queue, not loop. A "
        "consumer that claims the key and leaves the claim behind when the job fails finds "
        "its own claim on the retry, takes the job for done, and loses it."
    ),
    properties=("P1", "P2", "P10"),
    plan=(
        "publish a charge whose work fails before anything is written, on its first delivery "
        "only ([[hooks.work_failures]] when = \"before-work\")",
        "publish a charge whose work fails after it committed, on its first delivery only "
        "(when = \"after-work\")",
        "publish a charge whose work fails on every delivery, when the consumer promises to "
        "give up (max_attempts, or on_failure = \"dead-letter\")",
        "drain (allowing the promised retry delays), then check: one charge for each job that "
        "failed once, none for the one that always fails, which reached the dead-letter queue "
        "within max_attempts deliveries",
    ),
    drive=drive,
    needs=frozenset({"work-failure"}),
    applies=_declared,
)

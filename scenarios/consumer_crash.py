"""The consumer process dies while it holds a message: after the work, or before it."""

from __future__ import annotations

from harness.consumer import SETTLE, ConsumerContext, consumer_scenario

PAUSE_MS = 3_000


def drive(ctx: ConsumerContext) -> None:
    after_work = ctx.new_key()
    with ctx.fault("ack-held"):
        ctx.publish(after_work, label="crash:after-work")
        ctx.wait_for_effect(after_work)
        ctx.kill()
    ctx.restart()
    if "pause-before-work" in ctx.target.capabilities():
        before_work = ctx.new_key()
        ctx.publish(before_work, label="crash:before-work", pause=("before-work", PAUSE_MS))
        ctx.wait_for_delivery(before_work, paused=True)
        ctx.kill()
        ctx.restart()
        extra = ctx.pass_lease()  # the dead consumer's claim on the key must run out
        ctx.drain(timeout=SETTLE + extra)
        return
    ctx.drain()


SCENARIO = consumer_scenario(
    name="consumer-crash",
    summary="the consumer is killed after the work and before the ack, and before the work; "
            "each message still gets one charge",
    story=(
        "A worker is killed while it holds a message: an out-of-memory kill, a deploy, a "
        "host that goes away. If it dies after committing the charge but before acking, the "
        "broker redelivers the message to the restarted worker, which must find the key done "
        "and not charge again. If it dies before the work, the message must come back and be "
        "charged exactly once: a worker that acked on receipt has lost the job for good."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "hold what the consumer sends to the broker, publish a charge, wait until its charge "
        "is committed (effects oracle), then SIGKILL the consumer and restart it",
        "where the consumer has a pause hook before the work: publish a charge that makes "
        "it wait there, wait until it reports waiting, SIGKILL it and restart it; let the "
        "dead consumer's claim on the key run out (advance the clock past the promised "
        "lease, or wait it out in real time up to a minute)",
        "drain: wait until every redelivery is settled, stop the consumers, look at the queue",
        "check: exactly one charge per key, none lost, none left in the queue",
    ),
    drive=drive,
    needs=frozenset({"restart"}),
)

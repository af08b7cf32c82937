"""The consumer process dies while it holds a message: after the work, or before it."""

from __future__ import annotations

import time

from harness import Target
from harness.consumer import (
    SETTLE,
    ConsumerContext,
    consumer_scenario,
    pause_before_commit,
)

PAUSE_MS = 3_000
#: A job shorter than this (publish to effect) cannot be met mid-way by a kill timed from the
#: outside: without a pause hook the kill before the work is then not played.
MIN_LATENCY = 0.5
#: On a broker that settles by offsets, how long the kill before the work waits for the
#: consumer's offset to pass the record (a client's auto-commit timer commits on its own while
#: the job waits; Kafka's clients default to seconds, the corpus's to 100 ms).
COMMITTED_WAIT = 1.0


def drive(ctx: ConsumerContext) -> None:
    if "ack-hold" in ctx.target.capabilities():
        after_work = ctx.new_key()
        with ctx.fault("ack-held"):
            ctx.publish(after_work, label="crash:after-work")
            ctx.wait_for_effect(after_work)
            ctx.intend("work-done-ack-held", after_work, ("P1", "P9"), instance=0,
                       incident="kill")
            ctx.observe(after_work)
            ctx.kill()
        ctx.restart()
    else:
        _kill_before_commit(ctx)
    killed = _kill_mid_job(ctx)
    if killed is not None:
        ctx.restart(killed)
        extra = ctx.pass_lease()  # the dead consumer's claim on the key must run out
        ctx.drain(timeout=SETTLE + extra)
        return
    ctx.drain()


def _kill_before_commit(ctx: ConsumerContext) -> None:
    """Where holding what the consumer sends would hold more than its ack (Kafka), the job
    pauses after its work, before it settles with the broker (its offset commit), and the
    consumer is killed in the pause and started again: the message is read again."""
    key = ctx.new_key()
    instance = ctx.held_after_work(key, PAUSE_MS, incident="kill", label="crash:after-work")
    ctx.kill(instance)
    ctx.restart(instance)
    if "offsets" in ctx.target.capabilities():
        # the record is read again first: the next job waits behind it in its partition
        ctx.until(lambda: ctx.committed_past(key), SETTLE + PAUSE_MS / 1000)


def _kill_mid_job(ctx: ConsumerContext) -> int | None:
    """Kill the consumer while it holds a job that has not committed: paused before the work
    (pause hook), else half-way through the job's measured latency; the consumer killed, or
    None when neither can be done (a job too quick to meet), recorded as not played."""
    if "pause-before-work" in ctx.target.capabilities():
        key = ctx.new_key()
        ctx.publish(key, label="crash:before-work", pause=("before-work", PAUSE_MS))
        # the pause starts when the consumer takes the job: a feed says when it does (a member
        # just restarted may take seconds to rejoin and read); without one, the kill is timed
        # inside the pause from the publish
        ctx.wait_for_delivery(key, paused=True, timeout=SETTLE if ctx.feed is not None
                              else PAUSE_MS / 2000)
        if "offsets" in ctx.target.capabilities():  # an auto-commit timer may pass it now
            ctx.until(lambda: ctx.committed_past(key), COMMITTED_WAIT)
    else:
        latency = ctx.job_latency()
        if latency < MIN_LATENCY:
            ctx.history.record("info", "not-played", "nemesis", value={
                "step": "kill before the work",
                "reason": f"the job takes {latency * 1000:.0f} ms from publish to effect and "
                          "the consumer has no pause hook: a kill cannot be timed inside it"})
            return None
        key = ctx.new_key()
        published = time.monotonic()
        ctx.publish(key, label="crash:before-work")
        ctx.wait_for_delivery(key, timeout=latency / 2)
        time.sleep(max(0.0, published + latency / 2 - time.monotonic()))  # timed from latency
    instance = ctx.holder(key) or 0
    ctx.intend("killed-mid-job", key, ("P2", "P9"), instance=instance)
    ctx.observe(key)
    ctx.kill(instance)
    return instance


def _can_hold_the_ack(target: Target) -> str | None:
    return pause_before_commit(target, "a kill")


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
        "publish a charge that makes the consumer wait before the work (its pause hook), wait "
        "until it reports waiting (or, without an events feed, until the queue is empty), "
        "SIGKILL it and restart it; without a pause hook, time the kill half-way through the "
        "job's measured latency; let the dead consumer's claim on the key run out (advance "
        "the clock past the promised lease, or wait it out in real time up to a minute)",
        "drain: wait until every redelivery is settled, stop the consumers, look at the queue",
        "check: exactly one charge per key, none lost, none left in the queue; unknown unless "
        "the evidence shows each kill met the job where it was meant to (committed and not "
        "acked; taken and not committed)",
    ),
    drive=drive,
    needs=frozenset({"restart"}),
    applies=_can_hold_the_ack,
)

"""The broker gives up on a stalled consumer and redelivers its message to another one, while the
first is still working on it."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario

PAUSE_MS = 8_000


def drive(ctx: ConsumerContext) -> None:
    key = ctx.new_key()
    ctx.publish(key, pause=("before-work", PAUSE_MS))
    ctx.wait_for_delivery(key, paused=True)
    heartbeat = ctx.target.broker.heartbeat
    with ctx.fault("connection-stall", 0):
        if not ctx.wait_until_dropped(0, timeout=3 * heartbeat + 5):
            ctx.nemesis.inject("connection-cut", 0)  # the broker kept it: make it let go
        ctx.ensure_consumers(2)
        ctx.wait_for_effect(key, timeout=PAUSE_MS / 1000 + 10)
    ctx.nemesis.heal_all()
    ctx.drain()


SCENARIO = consumer_scenario(
    name="redelivered-while-working",
    summary="a stalled consumer's message goes to a second consumer while the first still "
            "works on it; one charge",
    story=(
        "A consumer takes a message and starts a slow job. Its connection stalls (a long GC "
        "pause, a saturated network): heartbeats stop, and the broker closes the connection "
        "and hands the message to another consumer. The first consumer is still working; it "
        "will commit, and its ack will fail. The second must see that the key is claimed and "
        "wait (or requeue) until the first has finished, then ack without charging. A "
        "consumer that checks for the key and inserts it later charges twice."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "publish a charge that makes the consumer pause before its work, and wait until it "
        "reports the pause",
        "stall that consumer's connection both ways (Toxiproxy timeout toxics) and wait until "
        "the broker stops counting it (missed heartbeats); cut it if the broker does not",
        "start a second consumer on the same store: the broker delivers the message to it "
        "while the first is still paused in the job",
        "wait until the charge is committed, heal, drain",
        "check: exactly one charge for the key",
    ),
    drive=drive,
    needs=frozenset({"instances", "pause-before-work"}),
)

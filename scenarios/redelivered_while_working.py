"""The broker gives up on a stalled consumer and redelivers its message to another one, while the
first is still working on it."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario

#: The shortest pause: long enough for the broker to drop a stalled consumer (about three
#: heartbeats) and for a second consumer to start, with the first still in the job.
MIN_PAUSE_MS = 8_000


def pause_ms(heartbeat: float) -> int:
    return max(MIN_PAUSE_MS, int((3 * heartbeat + 4) * 1000))


def drive(ctx: ConsumerContext) -> None:
    key = ctx.new_key()
    pause = pause_ms(ctx.target.broker.heartbeat)
    ctx.publish(key, pause=("before-work", pause))
    ctx.wait_for_delivery(key, paused=True, timeout=pause / 4000)
    heartbeat = ctx.target.broker.heartbeat
    with ctx.fault("connection-stall", 0):
        if not ctx.wait_until_dropped(0, timeout=min(3 * heartbeat + 5, pause / 2000)):
            ctx.nemesis.inject("connection-cut", 0)  # the broker kept it: make it let go
        ctx.ensure_consumers(2)
        ctx.intend("copy-while-working", key, ("P1", "P9"), instance=0,
                   pause_seconds=pause / 1000)
        ctx.wait_for_delivery(key, times=2, timeout=pause / 4000)
        ctx.observe(key)
        ctx.wait_for_effect(key, timeout=pause / 1000 + 10)
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
        "publish a charge that makes the consumer pause before its work (first delivery "
        "only: the copy the broker hands on does not pause), and wait until it reports the "
        "pause (without an events feed: until the queue is empty)",
        "stall that consumer's connection both ways (Toxiproxy timeout toxics) and wait until "
        "the broker stops counting it (missed heartbeats); cut it if the broker does not "
        "within half the pause",
        "start a second consumer on the same store: the broker delivers the message to it "
        "while the first is still paused in the job; look at the key's effects and the queue",
        "wait until the charge is committed, heal, drain",
        "check: exactly one charge for the key; unknown unless the copy is shown to have "
        "reached the second consumer while the first was still in the job",
    ),
    drive=drive,
    needs=frozenset({"instances", "pause-before-work"}),
)

"""The consumer commits the job, its ack is lost with its connection, and the broker redelivers."""

from __future__ import annotations

from harness import Target
from harness.consumer import ConsumerContext, consumer_scenario, pause_before_commit

#: On a broker where holding what the consumer sends would hold more than its ack (Kafka: its
#: fetches and heartbeats too), the job pauses this long after its work instead, and the cut
#: lands in the pause: long enough to be met, short of any poll interval.
COMMIT_PAUSE_MS = 1_500


def drive(ctx: ConsumerContext) -> None:
    if "ack-hold" in ctx.target.capabilities():
        _ack_held(ctx)
    else:
        _cut_at_commit(ctx)


def _ack_held(ctx: ConsumerContext) -> None:
    key = ctx.new_key()
    with ctx.fault("ack-held"):
        ctx.publish(key)
        ctx.wait_for_effect(key)
        ctx.intend("work-done-ack-held", key, ("P1", "P9"), instance=0, incident="cut")
        ctx.observe(key)
        ctx.nemesis.inject("connection-cut")  # drops the held ack with the connection
    ctx.nemesis.heal("connection-cut")
    ctx.deployment.wait_for_consumers(ctx.deployment.running())
    ctx.drain()


def _cut_at_commit(ctx: ConsumerContext) -> None:
    """The job pauses after its work (its offset not committed); the consumer's link is cut
    in the pause and stays cut until the broker has dropped the consumer, so the commit it
    sends once the link is back is refused and the message is read again."""
    key = ctx.new_key()
    instance = ctx.held_after_work(key, COMMIT_PAUSE_MS, incident="cut")
    with ctx.fault("connection-cut", instance):
        ctx.wait_until_dropped(instance, timeout=3 * ctx.target.broker.heartbeat + 10)
    ctx.deployment.wait_for_consumers(ctx.deployment.running())
    ctx.drain()


def _can_lose_the_ack(target: Target) -> str | None:
    return pause_before_commit(target, "a cut")


SCENARIO = consumer_scenario(
    name="lost-ack",
    summary="the job commits, the ack is lost with the connection, the message comes back; "
            "still one charge",
    story=(
        "The consumer takes a charge message, charges the card and commits, then sends its "
        "ack. The ack never reaches the broker: the connection drops on the way (a network "
        "blip, a load balancer's idle timeout). The broker still holds the message as "
        "unacknowledged, so when the connection closes it puts the message back and delivers "
        "it again. A consumer that deduplicates by the message's key finds the job done and "
        "acks without charging; one that trusts the broker to deliver once charges twice. On "
        "Kafka the ack is the offset commit: the link is cut after the work, the group drops "
        "the member, and the record is read again from the last committed offset."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "hold everything the consumer sends to the broker (a Toxiproxy timeout toxic on the "
        "consumer's proxy, upstream), so its ack cannot arrive; on Kafka, where that would "
        "hold its fetches too, the job pauses after its work instead",
        "publish a charge message (confirmed by the broker) and wait until the effects "
        "oracle counts its charge (on Kafka: until the consumer reports the pause after the "
        "work): the work committed",
        "cut the consumer's connection (the proxy disabled): the held ack is dropped and the "
        "broker requeues the message (on Kafka: the cut lasts until the group has dropped "
        "the member, so its offset commit is refused); heal, and wait until the consumer is "
        "back",
        "drain: wait until the redelivery is settled, stop the consumers, look at what is "
        "left in the queue",
        "check: exactly one charge for the key; unknown unless the charge was seen committed "
        "while the ack was held (on Kafka: before its offset was committed), before the cut",
    ),
    drive=drive,
    applies=_can_lose_the_ack,
)

"""The consumer commits the job, its ack is lost with its connection, and the broker redelivers."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario


def drive(ctx: ConsumerContext) -> None:
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
        "acks without charging; one that trusts the broker to deliver once charges twice."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "hold everything the consumer sends to the broker (a Toxiproxy timeout toxic on the "
        "consumer's proxy, upstream), so its ack cannot arrive",
        "publish a charge message (confirmed by the broker) and wait until the effects "
        "oracle counts its charge: the work committed",
        "cut the consumer's connection (the proxy disabled): the held ack is dropped and the "
        "broker requeues the message; heal, and wait until the consumer is back",
        "drain: wait until the redelivery is settled, stop the consumers, look at what is "
        "left in the queue",
        "check: exactly one charge for the key; unknown unless the charge was seen committed "
        "while the ack was held, before the cut",
    ),
    drive=drive,
)

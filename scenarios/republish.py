"""The producer never gets the broker's confirm and publishes the job again: same key, new id."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario


def drive(ctx: ConsumerContext) -> None:
    key = ctx.new_key()
    ctx.publish_losing_confirm(key)
    ctx.publish(key, label="republish", attempt=2)
    ctx.drain()


SCENARIO = consumer_scenario(
    name="republish-after-lost-confirm",
    summary="the publisher confirm is lost, the producer publishes again with the same key and "
            "a new message id; one charge",
    story=(
        "A producer publishes a charge and waits for the broker's confirm. The broker queued "
        "the message, but the confirm is lost on the way back, so the producer, unsure, "
        "publishes the job again. Its client library builds a new message with a new message "
        "id; the dedup key (the producer's own id for the job) is the same. A consumer that "
        "deduplicates on the message id sees two different messages and charges twice."
    ),
    properties=("P1", "P2"),
    plan=(
        "publish a charge on a producer connection whose way back from the broker is held "
        "(Toxiproxy timeout toxic, downstream): the broker queues it, the confirm never "
        "comes, the publish ends unknown",
        "publish it again on a fresh connection: same dedup key, new message id (confirmed)",
        "drain, then check: exactly one charge for the key",
    ),
    drive=drive,
    needs=frozenset({"republish"}),
)

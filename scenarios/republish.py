"""The producer never gets the broker's confirm and publishes the job again: same key, new id."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario


def drive(ctx: ConsumerContext) -> None:
    key = ctx.new_key()
    ctx.intend("first-publish-queued", key, ("P1",))
    ctx.publish_losing_confirm(key)
    ctx.wait_for_effect(key)
    ctx.observe(key)
    ctx.publish(key, label="republish", attempt=2, encoding=1)
    if ctx.target.message.dedup != "body":  # the key is not in the body: a twin has its bytes
        twin = ctx.new_key()
        ctx.same_body(twin, key)
        ctx.publish(twin, label="same-body")
    ctx.drain()


SCENARIO = consumer_scenario(
    name="republish-after-lost-confirm",
    summary="the publisher confirm is lost, the producer publishes again with the same key and "
            "a new message id; one charge",
    story=(
        "A producer publishes a charge and waits for the broker's confirm. The broker queued "
        "the message, but the confirm is lost on the way back, so the producer, unsure, "
        "publishes the job again. Its client library builds a new message with a new message "
        "id, and may write the body another way; the dedup key (the producer's own id for "
        "the job) is the same. A consumer that deduplicates on the message id, or on the "
        "body's bytes, sees two different messages and charges twice."
    ),
    properties=("P1", "P2"),
    plan=(
        "publish a charge on a producer connection whose way back from the broker is held "
        "(Toxiproxy timeout toxic, downstream): the broker queues it, the confirm never "
        "comes, the publish ends unknown; wait until its charge is seen",
        "publish it again on a fresh connection: same dedup key, new message id, the JSON "
        "body written another way (confirmed)",
        "publish another job with another key and a body of the very same bytes (where the "
        "key is not in the body)",
        "drain, then check: exactly one charge for each key; unknown unless the first "
        "message is seen to arrive before the republish",
    ),
    drive=drive,
    needs=frozenset({"republish"}),
)

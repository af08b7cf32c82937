"""A message the consumer can never process, followed by an ordinary one."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario


def drive(ctx: ConsumerContext) -> None:
    ctx.publish(ctx.new_key(), label="poison", poison=True)
    ctx.publish(ctx.new_key(), label="control")
    ctx.drain()


SCENARIO = consumer_scenario(
    name="poison-message",
    summary="a message that is not a valid charge: no effect, dead-lettered after bounded "
            "attempts, and the consumer keeps serving",
    story=(
        "One message is not a valid charge: a bad amount, a producer bug, a schema change. "
        "Processing it fails every time. A consumer that requeues every failure gets it back "
        "at once, forever: it burns CPU, floods the logs and, with prefetch, can starve the "
        "messages behind it. A correct consumer charges nothing, gives up after a bounded "
        "number of attempts, moves the message to a dead-letter queue for a person to look "
        "at, and goes on with the next message."
    ),
    properties=("P2", "P10"),
    plan=(
        "publish the poison message the target file declares ([message] poison), then an "
        "ordinary charge",
        "drain: wait until the ordinary charge is made and the poison message reached the "
        "promised dead-letter queue; stop the consumers and look at both queues",
        "check: no charge for the poison message, at most max_attempts deliveries, found in "
        "the dead-letter queue, the ordinary charge made once",
    ),
    drive=drive,
    needs=frozenset({"poison"}),
)

"""Several copies of one message reach several consumers at the same moment."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario

COPIES = 4


def drive(ctx: ConsumerContext) -> None:
    ctx.ensure_consumers(2)
    key = ctx.new_key()
    slow = ctx.copies_pause()
    ctx.intend("copies-overlapped", key, ("P1",), copies=COPIES)
    ctx.publish_copies(key, COPIES, pause=slow)
    ctx.observe(key)
    if ctx.target.message.dedup != "body":  # the key is not in the body: a twin has its bytes
        twin = ctx.new_key()
        ctx.same_body(twin, key)
        ctx.publish(twin, label="same-body")
    ctx.drain()


SCENARIO = consumer_scenario(
    name="burst-of-copies",
    summary="four copies of one message, two consumers with prefetch, at once; one charge; "
            "and another job whose body has the same bytes",
    story=(
        "The same job arrives several times at once: a producer retried in a tight loop, an "
        "outbox relay ran twice, a failover replayed a batch. Each copy may be written "
        "differently (another serializer, another member order). Two consumers, each taking "
        "several messages at a time, work on the copies in parallel. Only an atomic claim of "
        "the key before the work keeps it to one charge; a check followed by a later insert "
        "lets every copy that checked before the first insert through, and a consumer that "
        "deduplicates on the body's bytes takes a re-serialised copy for a new job and "
        "another job with the same bytes for a copy."
    ),
    properties=("P1", "P2"),
    plan=(
        "run two consumers on one store (each with its own prefetch)",
        "publish four copies of one charge with the same key and new message ids at once "
        "(all sent before any confirm is awaited; each JSON body written another way; each "
        "asks the consumer to pause briefly before the work, when it can, so the copies "
        "overlap); look at the key's effects and the queue",
        "publish a second charge with another key and a body of the very same bytes (where "
        "the key is not in the body)",
        "drain, then check: exactly one charge for each key; unknown unless two copies are "
        "shown in consumers' hands before the first job committed",
    ),
    drive=drive,
    needs=frozenset({"instances"}),
)

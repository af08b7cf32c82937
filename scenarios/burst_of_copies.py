"""Several copies of one message reach several consumers at the same moment."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario

COPIES = 4
PAUSE_MS = 500


def drive(ctx: ConsumerContext) -> None:
    ctx.ensure_consumers(2)
    key = ctx.new_key()
    slow = ("before-work", PAUSE_MS) if "pause-before-work" in ctx.target.capabilities() else None
    ctx.publish_copies(key, COPIES, pause=slow)
    ctx.drain()


SCENARIO = consumer_scenario(
    name="burst-of-copies",
    summary="four copies of one message, two consumers with prefetch, at once; one charge",
    story=(
        "The same job arrives several times at once: a producer retried in a tight loop, an "
        "outbox relay ran twice, a failover replayed a batch. Two consumers, each taking "
        "several messages at a time, work on the copies in parallel. Only an atomic claim of "
        "the key before the work keeps it to one charge; a check followed by a later insert "
        "lets every copy that checked before the first insert through."
    ),
    properties=("P1", "P2"),
    plan=(
        "run two consumers on one store (each with its own prefetch)",
        "publish four copies of one charge with the same key and new message ids at once "
        "(all sent before any confirm is awaited; each asks the consumer to pause briefly "
        "before the work, when it can, so the copies overlap)",
        "drain, then check: exactly one charge for the key",
    ),
    drive=drive,
    needs=frozenset({"instances"}),
)

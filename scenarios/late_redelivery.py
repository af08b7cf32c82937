"""A message comes back long after the first one ran: within the promised dedup window, and past
it."""

from __future__ import annotations

from harness.consumer import ConsumerContext, consumer_scenario


def drive(ctx: ConsumerContext) -> None:
    window = ctx.target.promises.dedup_window
    assert window is not None  # guaranteed by needs
    key = ctx.new_key()
    ctx.publish(key)
    ctx.wait_for_effect(key)
    ctx.advance_clock(window * 0.9)
    if ctx.target.hooks.cleanup is not None:
        ctx.deployment.cleanup()
    ctx.publish(key, label="within-window", attempt=2)
    ctx.drain()
    ctx.advance_clock(window * 0.2 + (ctx.target.promises.cleanup_interval or 0))
    if ctx.target.hooks.cleanup is not None:
        ctx.deployment.cleanup()
    if ctx.target.hooks.store_size is not None:
        ctx.observe_store_size()
    ctx.publish(key, label="late", attempt=3)
    ctx.drain()


SCENARIO = consumer_scenario(
    name="late-redelivery",
    summary="the same key comes back just inside the promised dedup window (no second charge) "
            "and past it (a new job, allowed)",
    story=(
        "Messages can come back late: parked in a retry queue, replayed from a dead-letter "
        "queue after a fix, republished by a producer that was down for hours. The consumer "
        "promises to remember a finished key for its dedup window. Inside the window the "
        "late copy must be acked without work; a dedup table with a shorter TTL than promised "
        "charges again. Past the window the key may be forgotten, and the table must not "
        "keep growing."
    ),
    properties=("P1", "P2", "P11"),
    plan=(
        "publish a charge and wait for its charge",
        "advance the consumer's clock to 90% of the promised dedup window, run its cleanup, "
        "publish the same key again: it must not be charged again",
        "advance past the window (and the cleanup interval), run the cleanup, look at the "
        "size of the dedup table, publish the key once more: a new charge is allowed",
        "check: at most one charge per dedup window; expired keys removed",
    ),
    drive=drive,
    needs=frozenset({"clock", "dedup-window"}),
)

"""A retry that arrives while the original is still being handled.

Without a slow hook the retry is timed by the endpoint's own latency, measured first: it
leaves a fraction of that time after the original, which on most targets is while the original
still runs.  Whether it did is read from the recorded times by the checker, never assumed.
With a slow hook the original is also held long enough for a retry to surely meet it, and,
when a lease is promised, for a retry to arrive after the lease while it still runs.
"""

from __future__ import annotations

import time
from dataclasses import replace

from harness import Request, Scenario, ScenarioContext

SLOW_MS = 1500
FRACTIONS = (0.1, 0.25, 0.5)


def _pair(ctx: ScenarioContext, latency: float, fraction: float) -> None:
    """An original and its retry, the retry leaving ``fraction`` of the latency later."""
    request = ctx.request(ctx.new_key(), label="original")
    retry = replace(request, label="in-flight-retry")
    answers = ctx.concurrently([request, retry], stagger=latency * fraction)
    _settle(ctx, request, answers[-1].attempt or 2)


def _settle(ctx: ScenarioContext, request: Request, last_attempt: int) -> None:
    ctx.retry_until_answer(replace(request, label="retry"), process="c1",
                           first_attempt=last_attempt + 1)


def _slowed(ctx: ScenarioContext) -> None:
    request = ctx.request(ctx.new_key(), label="original")
    original = ctx.send_slowly(request, slow_ms=SLOW_MS)
    ctx.send(replace(request, label="in-flight-retry"), process="c1", attempt=2)
    original.wait()
    _settle(ctx, request, 2)


def _after_lease(ctx: ScenarioContext, lease: float) -> None:
    """The original outlives the lease; a retry comes after the lease while it still runs."""
    clocked = ctx.lease_on_the_clock
    slow_ms = SLOW_MS if clocked else int((lease + 5) * 1000)
    request = ctx.request(ctx.new_key(), label="original")
    since = time.monotonic()
    original = ctx.send_slowly(request, slow_ms=slow_ms)
    if ctx.pass_lease(request, since=since):
        ctx.send(replace(request, label="after-lease"), process="c1", attempt=2)
    original.wait()
    _settle(ctx, request, 2)


def run(ctx: ScenarioContext) -> None:
    latency = ctx.measure_latency()
    for fraction in FRACTIONS:
        _pair(ctx, latency, fraction)
    if ctx.target.hooks.slow is None:
        return
    _slowed(ctx)
    lease = ctx.target.promises.lease
    if lease is not None and ctx.target.lease_can_run_out:
        _after_lease(ctx, lease)
    elif lease is not None:
        ctx.lease_not_waited()


SCENARIO = Scenario(
    name="in-flight-retry",
    summary="a retry while the original is still running: 409 with Retry-After, or a wait and "
            "the replay",
    story=(
        "The payment provider is slow today. The client's own timeout is shorter than the "
        "provider's latency, so it retries while the first request is still being processed. "
        "The key is claimed but has no stored response yet. The server must not run the charge "
        "a second time: it answers 409 with a hint to retry shortly, or, if it promises to, "
        "waits for the original to finish and replays its response. Once the promised lease "
        "has run out a retry may take the key over, but the original, still running, must not "
        "charge as well."
    ),
    properties=("P1", "P2", "P3", "P5"),
    plan=(
        "measure how long an ordinary request takes (the median of a few, each with a fresh "
        "key)",
        "for 10%, 25% and 50% of that time: send a charge and, that long after it, a retry "
        "with the same key and body; then retry until a final answer",
        f"with a slow hook: send a charge slowed by {SLOW_MS} ms; once the target reports the "
        "key in progress (or after a short pause when it cannot say), retry; after the "
        "original finishes, retry until a final answer",
        "with a slow hook and a promised lease: hold a charge past the lease (advancing the "
        "target's clock, or in real time for a lease up to a minute), retry while it still "
        "runs, then retry until a final answer",
        "check: a retry that arrived while the original ran got 409 (with Retry-After when "
        "promised) or the replay; one charge per key",
    ),
    run=run,
    uses=frozenset({"clock", "store-size"}),
    expected_seconds=3.0,
)

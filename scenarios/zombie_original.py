"""The original request was slow, not dead: after its lease a retry takes over, then the
original wakes up and tries to commit."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext
from harness._target import Target

SLOW_MS = 1200


def _taken_over(ctx: ScenarioContext, lease: float) -> None:
    """The original outlives its lease, a retry takes the key over, the original wakes."""
    request = ctx.request(ctx.new_key(), label="original")
    original = ctx.send_slowly(request, slow_ms=SLOW_MS)
    ctx.advance_clock(lease + 1)
    ctx.send(replace(request, label="takeover"), process="c1", attempt=2)
    original.wait()
    ctx.converge(replace(request, label="retry"), process="c1", first_attempt=3)


def _outlived(ctx: ScenarioContext, lease: float) -> None:
    """The original outlives its lease with nobody taking the key over: its answer is still
    the key's, and an identical retry must get it replayed."""
    request = ctx.request(ctx.new_key(), label="original")
    original = ctx.send_slowly(request, slow_ms=SLOW_MS)
    ctx.advance_clock(lease + 1)
    original.wait()
    ctx.retry_until_answer(replace(request, label="retry"), first_attempt=2)


def run(ctx: ScenarioContext) -> None:
    lease = ctx.target.promises.lease
    assert lease is not None  # guaranteed by needs
    _taken_over(ctx, lease)
    _outlived(ctx, lease)


def _applies(target: Target) -> str | None:
    if target.promises.lease_renewed:
        return (f"target {target.name} renews its lease while the handler runs "
                "(promises.lease_renewed), so a slow original keeps its key; in-flight-retry "
                "checks that in real time")
    return None


SCENARIO = Scenario(
    name="zombie-original",
    summary="a handler slower than the lease: the retry takes over, the late original must not "
            "charge again",
    story=(
        "A lease alone does not make crash recovery safe. The original request is not dead, "
        "only slow: its payment provider hangs past the lease. A retry arrives, sees the lease "
        "expired, takes the key over and charges. Then the original wakes up and commits its "
        "own charge. Unless every claim carries a fencing token that the final commit checks, "
        "the card is charged twice, and the two answers name two different charges. And when "
        "nobody takes the key over, the late original's answer is still the key's: a server "
        "that stores it without its fingerprint, because the lease it held had run out, "
        "refuses every identical retry as a reused key."
    ),
    properties=("P1", "P2", "P3", "P4"),
    plan=(
        f"send a charge whose handler is slowed by {SLOW_MS} ms",
        "once it is in progress, advance the target's clock past the promised lease",
        "retry with the same key: the retry takes the key over and runs",
        "let the original finish; then retry until a final answer",
        "send another charge slowed past its lease, and let it finish with nobody taking its "
        "key over; then retry it, identical, until a final answer",
        "check: exactly one charge per key, every success names it, and the identical retry "
        "of the request that outlived its lease gets its answer replayed",
    ),
    run=run,
    needs=frozenset({"slow", "clock", "lease"}),
    applies=_applies,
)

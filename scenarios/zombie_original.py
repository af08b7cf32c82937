"""The original request was slow, not dead: after its lease a retry takes over, then the
original wakes up and tries to commit."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext

SLOW_MS = 1200


def run(ctx: ScenarioContext) -> None:
    lease = ctx.target.promises.lease
    assert lease is not None  # guaranteed by needs
    request = ctx.request(ctx.new_key(), label="original")
    original = ctx.send_slowly(request, slow_ms=SLOW_MS)
    ctx.advance_clock(lease + 1)
    ctx.send(replace(request, label="takeover"), process="c1", attempt=2)
    original.wait()
    ctx.converge(replace(request, label="retry"), process="c1", first_attempt=3)


SCENARIO = Scenario(
    name="zombie-original",
    summary="a handler slower than the lease: the retry takes over, the late original must not "
            "charge again",
    story=(
        "A lease alone does not make crash recovery safe. The original request is not dead, "
        "only slow: its payment provider hangs past the lease. A retry arrives, sees the lease "
        "expired, takes the key over and charges. Then the original wakes up and commits its "
        "own charge. Unless every claim carries a fencing token that the final commit checks, "
        "the card is charged twice, and the two answers name two different charges."
    ),
    properties=("P1", "P2"),
    plan=(
        f"send a charge whose handler is slowed by {SLOW_MS} ms",
        "once it is in progress, advance the target's clock past the promised lease",
        "retry with the same key: the retry takes the key over and runs",
        "let the original finish; then retry until a final answer",
        "check: exactly one charge, and every success names it",
    ),
    run=run,
    needs=frozenset({"slow", "clock", "lease"}),
)

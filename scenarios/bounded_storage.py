"""Steady traffic over days of target time: expired keys must go."""

from __future__ import annotations

from harness import Scenario, ScenarioContext

ROUNDS = 6
KEYS_PER_ROUND = 4


def run(ctx: ScenarioContext) -> None:
    retention = ctx.target.promises.retention
    assert retention is not None  # guaranteed by needs
    for _ in range(ROUNDS):
        for _ in range(KEYS_PER_ROUND):
            ctx.retry_until_answer(ctx.request(ctx.new_key(), label="steady"), first_attempt=1)
        ctx.advance_clock(retention / 2)
        if ctx.target.hooks.cleanup is not None:
            ctx.deployment.cleanup()
        ctx.observe_store_size()


SCENARIO = Scenario(
    name="bounded-storage",
    summary="steady traffic while the clock runs past retention: expired keys are removed",
    story=(
        "Every request with a key leaves a row behind. A background job must delete rows older "
        "than the retention window, or the table grows without bound: indexes slow down, the "
        "cleanup that finally runs locks the table, the disk fills. Under steady traffic the "
        "number of stored keys should level off at about one retention window's worth."
    ),
    properties=("P11",),
    plan=(
        f"{ROUNDS} rounds: {KEYS_PER_ROUND} charges with fresh keys, then advance the target's "
        "clock by half the retention, run the cleanup hook when there is one, read the key "
        "store's size",
        "check: once a full retention has passed, the store holds no more keys than the "
        "window can",
    ),
    run=run,
    needs=frozenset({"clock", "store-size", "retention"}),
)

"""The database between the server and its keys fails: before, during and at the commit of a
request, and for a while."""

from __future__ import annotations

from dataclasses import replace

from harness import Request, Scenario, ScenarioContext

#: Long enough for the fault to go on while the handler runs: the harness injects it as soon
#: as the target reports the key in progress, or after a 0.3 s pause when it cannot say.
SLOW_MS = 500


def _mid_request(ctx: ScenarioContext, fault: str, label: str) -> None:
    """The store fails while a slow request is being handled, so its commit meets the fault."""
    request = ctx.request(ctx.new_key(), label=label)
    original = ctx.send_slowly(request, slow_ms=SLOW_MS)
    with ctx.fault(fault):
        original.wait()
    ctx.converge(replace(request, label="retry"))


def run(ctx: ScenarioContext) -> None:
    before = ctx.request(ctx.new_key(), label="store:reset-before")
    with ctx.fault("store-reset"):
        ctx.send(before)
    ctx.converge(replace(before, label="retry"))

    _mid_request(ctx, "store-reset", "store:reset-during")
    _mid_request(ctx, "store-timeout", "store:lost-at-commit")

    down: list[Request] = [ctx.request(ctx.new_key(), label="store:down") for _ in range(2)]
    with ctx.fault("store-down"):
        for request in down:
            ctx.send(request)
    for request in down:
        ctx.converge(replace(request, label="retry"))


SCENARIO = Scenario(
    name="store-outage",
    summary="the server's database resets or vanishes mid-request: 503s, then exactly one "
            "charge per key",
    story=(
        "The database itself fails. A connection drops before the request touches it, or in "
        "the middle of it, or at the commit, when the server cannot know whether its own "
        "transaction committed. Or the database is simply unreachable for a while. A correct "
        "server answers 503 and writes nothing half-way; the next retry then finds either the "
        "completed key and replays it, or a released key and runs exactly once."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "reset the server's database connections, send a charge, heal, retry until answered",
        f"send a charge slowed by {SLOW_MS} ms; while it runs, reset the database connections",
        "the same, but the database stops answering, so the commit's outcome is unknown to the "
        "server",
        "take the database proxy down, send two charges, bring it back, retry both",
        "every retry outwaits the promised lease while the key is still claimed (see "
        "crash-mid-request)",
        "check: only 2xx, replays, 409 or 503 while the store failed; then exactly one charge "
        "per key and no key stuck",
    ),
    run=run,
    needs=frozenset({"store-proxy", "slow"}),
    expected_seconds=8.0,
)

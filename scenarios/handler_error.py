"""The handler fails: the key is released (and the retry runs once) or the error is stored (and
replayed), as the target promises; never a charge without a stored outcome."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext


def run(ctx: ScenarioContext) -> None:
    hook = ctx.target.hooks.handler_error
    assert hook is not None  # guaranteed by needs
    request = ctx.request(ctx.new_key(), label="original")
    ctx.send(replace(request, headers={hook.header: hook.value}))
    ctx.retry_until_answer(replace(request, label="retry"), first_attempt=2)


SCENARIO = Scenario(
    name="handler-error",
    summary="a failing handler: with release the retry runs once, with store it gets the same "
            "error",
    story=(
        "The charge handler throws: the provider answered something unexpected, a bug, a "
        "timeout. What should a retry see? A server that releases the key rolls the work back "
        "and lets the retry run again, exactly once. A server that stores the error (as Stripe "
        "does once execution has begun) replays the same 500. What must never happen is a "
        "charge whose stored outcome is an error: the client is told the charge failed, stops, "
        "and the money is gone."
    ),
    properties=("P1", "P2", "P3"),
    plan=(
        "send a charge whose handler raises (the handler-error hook)",
        "retry with the same key and body, without the hook, until a final answer",
        "check: with errors = release, one charge and a success; with errors = store, the same "
        "error replayed and no charge",
    ),
    run=run,
    needs=frozenset({"handler-error"}),
)

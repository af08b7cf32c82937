"""The handler fails: the key is released (and the retry runs once) or the error is stored (and
replayed), as the target promises; never a charge without a stored outcome.  Every way the
target file declares to make its handler fail is tried, because they fail differently: an
exception before the work charges nothing, one after it may have charged, a 5xx answer is
an answer."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext


def run(ctx: ScenarioContext) -> None:
    for fault in ctx.target.hooks.handler_faults:
        request = ctx.request(ctx.new_key(), label=f"handler:{fault.name}")
        ctx.send(replace(request, headers={**request.headers, fault.header: fault.value}))
        # Told "in progress" after the failure, the key may wait out a lease: outwait it.
        ctx.converge(replace(request, label="retry"), first_attempt=2, errors=fault.errors)


SCENARIO = Scenario(
    name="handler-error",
    summary="a failing handler: with release the retry runs once, with store it gets the same "
            "error",
    story=(
        "The charge handler fails: it throws before doing anything, it throws after the "
        "provider already charged, or it answers a 5xx itself. What should a retry see? A "
        "server that releases the key rolls the work back and lets the retry run again, "
        "exactly once. A server that stores the error (as Stripe "
        "does once execution has begun) replays the same 500. What must never happen is a "
        "charge whose stored outcome is an error: the client is told the charge failed, stops, "
        "and the money is gone."
    ),
    properties=("P1", "P2", "P3"),
    plan=(
        "for each handler fault the target declares (before the work, after the work, an "
        "error answer): send a charge with a fresh key and the fault's header",
        "  retry with the same key and body, without the header, until a final answer or the "
        "retry budget; while the key is answered 'in progress', outwait the promised lease "
        "(moving the clock, or in real time for a lease the service renews itself)",
        "check: with errors = release, one charge and a success; with errors = store, the same "
        "error replayed and no charge",
    ),
    run=run,
    needs=frozenset({"handler-error"}),
)

"""The server dies in the middle of a request, comes back, and the client keeps retrying."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext

POINTS = ("after-claim", "after-work", "before-response")


def run(ctx: ScenarioContext) -> None:
    hook = ctx.target.hooks.crash
    assert hook is not None  # guaranteed by needs
    points = [p for p in POINTS if p in hook.points] if hook.header else ["in-flight"]
    for point in points:
        request = ctx.request(ctx.new_key(), label=f"crash:{point}")
        ctx.crash_during(request, point)
        ctx.converge(replace(request, label="retry"))


SCENARIO = Scenario(
    name="crash-mid-request",
    summary="the server dies after the claim, after the work, before the response; retries "
            "converge to one charge",
    story=(
        "The process is killed in the middle of a charge: an out-of-memory kill, a deploy, a "
        "host failure. It may die after claiming the key, after doing the work, or after "
        "committing but before answering. When it comes back the client is still retrying. A "
        "correct server either finds the finished charge and replays it, or, once the dead "
        "request's lease has run out, runs it exactly once. A server without a lease leaves "
        "the key 'in progress' forever; one that commits the charge and the stored response "
        "separately charges twice."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "for each crash point the target offers (after the claim, after the work, before the "
        "response): send a charge that makes the target die there, then restart it",
        "retry with the same key until a final answer; while the key is still claimed by the "
        "dead request, outwait the promised lease: advance the target's clock past it (clock "
        "hook), or keep retrying with backoff in real time until it has run out and a few "
        "times more (a lease up to a minute), or record that it could not be waited for",
        "check: exactly one charge per key, and no key in progress past the lease",
    ),
    run=run,
    needs=frozenset({"crash"}),
    expected_seconds=1.5,
)

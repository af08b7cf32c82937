"""Two tenants that happen to choose the same key."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext


def run(ctx: ScenarioContext) -> None:
    # One factor: only the tenant differs (the same key and the same body), so a server that
    # keys its stored responses by key and request alone replays one tenant's to the other.
    key, body = ctx.new_key(), ctx.body()
    requests = [ctx.request(key, body, tenant=ctx.tenant(name), label=f"tenant:{name}")
                for name in ("alice", "bob")]
    for request in requests:
        ctx.retry_until_answer(request, first_attempt=1, process=f"c-{request.tenant}")
    for request in requests:
        ctx.retry_until_answer(replace(request, label="retry"), first_attempt=5,
                               process=f"c-{request.tenant}")


SCENARIO = Scenario(
    name="tenant-collision",
    summary="two tenants send the same key with the same body: two charges, no shared "
            "responses",
    story=(
        "Keys are chosen by clients, and clients of different customers do not coordinate: two "
        "of them can send the same key (a counter, a date, a badly seeded random generator). "
        "If the server stores keys globally, the second customer gets a 422, or worse, the "
        "first customer's stored response: a charge that is not theirs, with their neighbour's "
        "data in it. Keys must be scoped per tenant."
    ),
    properties=("P1", "P2", "P8"),
    plan=(
        "tenant alice charges with key K; tenant bob charges with the same K and the same body",
        "each retries with K once more",
        "check: one charge each, each tenant only ever sees its own response",
    ),
    run=run,
    needs=frozenset({"tenants"}),
)

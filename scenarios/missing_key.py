"""Requests without an idempotency key: refused in strict mode, processed in lax mode.

How many charges a keyless request made depends on how the target can count them: exactly
(the oracle answers for "no key"), as the difference of totals (each request then goes alone,
with the total counted just before and just after it, so the difference is its own), or not at
all (only the statuses can be judged).
"""

from __future__ import annotations

from harness import Scenario, ScenarioContext
from harness._target import keyless_counting

KEYLESS_REQUESTS = 2


def run(ctx: ScenarioContext) -> None:
    tenant = ctx.tenant("keyless")
    body = ctx.body()
    counting = keyless_counting(ctx.target.effects)
    for attempt in range(1, KEYLESS_REQUESTS + 1):
        request = ctx.request(None, body, tenant=tenant, label="no-key")
        if counting == "total":
            ctx.send_keyless_alone(request, attempt=attempt)
        else:
            ctx.send(request, attempt=attempt)
    ctx.retry_until_answer(ctx.request(ctx.new_key(), label="control"), first_attempt=1)


SCENARIO = Scenario(
    name="missing-key",
    summary="no Idempotency-Key header: 400 in strict mode, processed normally in lax mode",
    story=(
        "A client forgets the header. A strict server refuses the request with 400, so the "
        "mistake shows up in development instead of as a double charge in production. A lax "
        "server processes it like any request without protection: two such requests are two "
        "charges, and that is what lax promises. Either way the server must do what it says."
    ),
    properties=("P7",),
    plan=(
        f"send the same charge {KEYLESS_REQUESTS} times without a key (under a tenant of its "
        "own); when the target counts keyless charges only as a total, each one alone, with "
        "the total counted just before and just after it",
        "send an ordinary keyed request",
        "check: strict: 400 each time and no charge; lax: a success and one charge each (when "
        "the charges can be counted; else the statuses only)",
    ),
    run=run,
    # Counted as a difference of totals, a keyless charge needs nothing else charging meanwhile:
    # the scenario then runs alone, not beside others.
    uses=frozenset({"keyless-total"}),
)

"""Requests without an idempotency key: refused in strict mode, processed in lax mode."""

from __future__ import annotations

from harness import Scenario, ScenarioContext


def run(ctx: ScenarioContext) -> None:
    tenant = ctx.tenant("keyless")
    body = ctx.body()
    for attempt in (1, 2):
        ctx.send(ctx.request(None, body, tenant=tenant, label="no-key"), attempt=attempt)
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
        "send the same charge twice without a key (under a tenant of its own)",
        "send an ordinary keyed request",
        "check: strict: 400 twice and no charge; lax: two successes and two charges",
    ),
    run=run,
)

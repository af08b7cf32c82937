"""A key reused for a different request must be refused; the same request in other clothes must
not be."""

from __future__ import annotations

import json
from dataclasses import replace

from harness import Scenario, ScenarioContext


def run(ctx: ScenarioContext) -> None:
    key = ctx.new_key()
    body = ctx.body()
    original = ctx.request(key, body, label="original")
    attempts = ctx.retry_until_answer(original, first_attempt=1)
    attempt = len(attempts)

    endpoint = ctx.target.endpoint
    other_body = ctx.body()
    while other_body == body:
        other_body = ctx.body()
    reuses = (
        replace(original, body=other_body, label="reuse:body"),
        replace(original, path=endpoint.path.rstrip("/") + "/reuse", label="reuse:path"),
        replace(original, method="PUT" if endpoint.method != "PUT" else "PATCH",
                label="reuse:method"),
    )
    for reuse in reuses:
        attempt += 1
        ctx.send(reuse, attempt=attempt)

    reordered = dict(reversed(list(body.items()))) if isinstance(body, dict) else body
    same = replace(original, raw_body=json.dumps(reordered, indent=3).encode() + b"\n",
                   label="same:reordered")
    ctx.retry_until_answer(same, first_attempt=attempt + 1)


SCENARIO = Scenario(
    name="key-reuse",
    summary="one key, a different request: 422 and no charge; the same JSON reordered: a replay",
    story=(
        "A buggy client reuses an idempotency key for a different request: another amount, "
        "another path, another method. If the server only remembers the key, it answers with "
        "the first request's stored response and the client believes its second charge went "
        "through. A correct server fingerprints the whole request and refuses the reuse with "
        "422. But the fingerprint must be over canonical JSON: the same body with its fields in "
        "another order and other whitespace is the same request, and must be replayed, not "
        "refused."
    ),
    properties=("P1", "P3", "P4"),
    plan=(
        "send a charge with a fresh key until it is answered",
        "send the same key with a different body, then a different path, then a different method",
        "send the same key with the original body, its fields reversed and re-indented",
        "check: 422 for each reuse and no second charge; a replay for the reordered body",
    ),
    run=run,
)

"""A key reused for a different request must be refused; the same request in other clothes must
not be.  Reuse is probed only on operations the target declares keyed: a made-up route or
method proves nothing about the idempotency layer, only about the router."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from harness import Request, Scenario, ScenarioContext
from harness._target import Endpoint
from harness.http._variations import field_changes, operation_change, query_change


def _other_body(ctx: ScenarioContext, operation: Endpoint, body: Any) -> Any:
    other = ctx.body(operation)
    while other == body:
        other = ctx.body(operation)
    return other


def _reuses(ctx: ScenarioContext, operation: Endpoint, original: Request) -> list[Request]:
    """Each way the same key can come back with a different request, on declared operations:
    another body altogether, then one factor at a time (each variable field alone, another
    declared operation with the same body, another query string)."""
    body = original.body
    reuses = [replace(original, body=_other_body(ctx, operation, body), label="reuse:body")]
    variations = field_changes(operation, body, _other_body(ctx, operation, body))
    other = operation_change(ctx.target, operation, body, ctx.body(
        next(iter(ctx.target.sharing_keys_with(operation)), operation)))
    if other is not None:
        variations.append(other)
    variations.append(query_change(operation, body))
    reuses += [replace(original, method=v.method, path=v.path, body=v.body, label=v.label)
               for v in variations]
    return reuses


def run(ctx: ScenarioContext) -> None:
    operation = ctx.target.endpoint
    original = ctx.request(ctx.new_key(), operation=operation, label="original")
    attempt = len(ctx.retry_until_answer(original, first_attempt=1))
    for reuse in _reuses(ctx, operation, original):
        attempt += 1
        ctx.send(reuse, attempt=attempt)

    body = original.body
    reordered = dict(reversed(list(body.items()))) if isinstance(body, dict) else body
    same = replace(original, raw_body=json.dumps(reordered, indent=3).encode() + b"\n",
                   label="same:reordered")
    ctx.retry_until_answer(same, first_attempt=attempt + 1)

    # Two different requests with one fresh key, released at the same instant: at most one may
    # run; the other must be told in progress or refused as a reuse, never run as well.
    key = ctx.new_key()
    pair = [ctx.request(key, operation=operation, label="reuse:concurrent")]
    pair.append(replace(pair[0], body=_other_body(ctx, operation, pair[0].body)))
    answers = ctx.concurrently(pair)
    for position, (request, answer) in enumerate(zip(pair, answers, strict=True)):
        if not ctx.is_final(answer):
            ctx.retry_until_answer(replace(request, label="retry"), process=f"c{position}")


SCENARIO = Scenario(
    name="key-reuse",
    summary="one key, a different request on a declared operation: the mismatch status and no "
            "charge; the same JSON reordered: a replay",
    story=(
        "A buggy client reuses an idempotency key for a different request: another amount, "
        "another value deep inside the body, another currency, another query string, the same "
        "body sent to another operation that shares the key space. If the server only "
        "remembers the key, it answers with the first "
        "request's stored response and the client believes its second charge went through. A "
        "correct server fingerprints the whole request and refuses the reuse (422 in the "
        "draft, or the status it promises). The fingerprint must be over canonical JSON: the "
        "same body with its fields in another order and other whitespace is the same request, "
        "and must be replayed, not refused. And two different requests racing with one fresh "
        "key must not both run."
    ),
    properties=("P1", "P3", "P4"),
    plan=(
        "send a charge with a fresh key until it is answered",
        "send the same key with a different body; then one change at a time: each field the "
        "template fills from a placeholder, alone, to a fresh value; each field with declared "
        "other values (valid_values) to each of them; the same body on another declared "
        "operation of the same key scope (when there is one and its body has the same fields); "
        "the same body with another query string on the same path",
        "send the same key with the original body, its fields reversed and re-indented",
        "release two different bodies with one fresh key at the same instant; a client told "
        "'in progress' retries until answered",
        "check: the promised mismatch status for each reuse and no second charge; a replay for "
        "the reordered body; at most one charge for the racing pair",
    ),
    run=run,
)

"""A key reused for a different request must be refused; the same request in other clothes must
not be.  Reuse is probed only on operations the target declares keyed: a made-up route or
method proves nothing about the idempotency layer, only about the router."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from harness import Request, Scenario, ScenarioContext
from harness._target import Endpoint, placeholders

QUERY_PROBE = "idem_probe=1"


def _leaves(template: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every (field path, template value) of a JSON object template, depth first."""
    if isinstance(template, dict):
        for name, value in template.items():
            if isinstance(value, dict) and value:
                yield from _leaves(value, (*path, name))
            else:
                yield (*path, name), value


def _field_to_vary(template: Any) -> tuple[str, ...] | None:
    """One field whose value can change while the request stays valid: a nested one when the
    template nests objects (a fingerprint over the top level only misses it), else a top-level
    one; a field filled from a placeholder first (its other values are as valid)."""
    leaves = list(_leaves(template))
    nested = [leaf for leaf in leaves if len(leaf[0]) > 1]
    for candidates in (nested, leaves):
        with_placeholder = [p for p, v in candidates if placeholders(v)]
        scalar = [p for p, v in candidates if isinstance(v, (str, int, float))
                  and not isinstance(v, bool)]
        if with_placeholder or scalar:
            return (with_placeholder or scalar)[0]
    return None


def _at(value: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        value = value[name]
    return value


def _with_field_changed(ctx: ScenarioContext, operation: Endpoint, body: Any,
                        path: tuple[str, ...]) -> Any:
    """``body`` with only the field at ``path`` given another value: a fresh placeholder value
    when the template fills it from one, else the number plus one or the text with a suffix."""
    changed = copy.deepcopy(body)
    holder = _at(changed, path[:-1])
    old = holder[path[-1]]
    new = old
    if placeholders(_at(operation.body, path)):
        for _ in range(20):
            new = _at(ctx.body(operation), path)
            if new != old:
                break
    if new == old:
        new = old + 1 if isinstance(old, (int, float)) and not isinstance(old, bool) else f"{old}-2"
    holder[path[-1]] = new
    return changed


def _other_body(ctx: ScenarioContext, operation: Endpoint, body: Any) -> Any:
    other = ctx.body(operation)
    while other == body:
        other = ctx.body(operation)
    return other


def _reuses(ctx: ScenarioContext, operation: Endpoint, original: Request) -> list[Request]:
    """Each way the same key can come back with a different request, on declared operations."""
    reuses = [replace(original, body=_other_body(ctx, operation, original.body),
                      label="reuse:body")]
    sharing = ctx.target.sharing_keys_with(operation)
    if sharing:
        other = sharing[0]
        reuses.append(replace(original, method=other.method, path=other.path,
                              body=ctx.body(other), label="reuse:operation"))
    field = _field_to_vary(operation.body)
    if field is not None:
        what = "nested-field" if len(field) > 1 else "field"
        reuses.append(replace(original, body=_with_field_changed(ctx, operation,
                                                                 original.body, field),
                              label=f"reuse:{what}"))
    separator = "&" if "?" in operation.path else "?"
    reuses.append(replace(original, path=f"{operation.path}{separator}{QUERY_PROBE}",
                          label="reuse:query"))
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
        "another value deep inside the body, another query string, another operation that "
        "shares the key space. If the server only remembers the key, it answers with the first "
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
        "send the same key with a different body; on another declared operation of the same "
        "key scope (when there is one); with one field changed (a nested one when the body "
        "nests objects); with another query string on the same path",
        "send the same key with the original body, its fields reversed and re-indented",
        "release two different bodies with one fresh key at the same instant; a client told "
        "'in progress' retries until answered",
        "check: the promised mismatch status for each reuse and no second charge; a replay for "
        "the reordered body; at most one charge for the racing pair",
    ),
    run=run,
)

"""Hostile keys and bodies, and headers that pretend to be a replay.

A key is hostile only when the target's declared key rules reject it (or it is no key at all:
empty, or with control characters); an unusual key the rules accept is an ordinary operation
and is judged as one, so a target that allows long or non-ASCII keys is not blamed for
serving them.
"""

from __future__ import annotations

from harness import KeySpec, Scenario, ScenarioContext

NESTING = 100_000
LONG_UNLIMITED = 1024  # an unusual length to try when the target declares no maximum
NON_ASCII = "clé-ключ-鍵"
SQL_FRAGMENT = "'; DROP TABLE idempotency_keys; --"


def _always_hostile(spec: KeySpec) -> dict[str, str]:
    """Headers that spell no key whatever the rules say."""
    keys = {"empty-key": "", "control-character": "key\x01with\x7fcontrol"}
    if spec.syntax == "sf-string":
        keys["sf-string-unterminated"] = '"abc'
    return keys


def _unusual_keys(ctx: ScenarioContext) -> dict[str, str]:
    """Keys that are hostile or merely odd depending on the declared rules; each unique to
    this run, so an accepted one is a fresh operation.  A non-ASCII key is sent only where a
    declared pattern refuses it or the file says any value is a key: header bytes decoded as
    latin-1 (WSGI, Starlette, Node) name another key than the UTF-8 one sent."""
    spec = ctx.target.key
    keys = {"sql-fragment": f"{ctx.new_key()}{SQL_FRAGMENT}"}
    if spec.refuses_non_ascii or spec.allows_non_ascii:
        keys["non-ascii"] = f"{ctx.new_key()}-{NON_ASCII}"
    base = ctx.new_key()
    if spec.max_length:
        keys["key-too-long"] = base + "k" * max(1, spec.max_length + 1 - len(base))
    else:
        keys["long-key"] = base + "k" * (LONG_UNLIMITED - len(base))
    return keys


def _hostile_by_rules(spec: KeySpec, name: str, key: str) -> bool:
    """Non-ASCII is refused only by a declared pattern; everything else by the rules as
    declared (length, pattern and characters)."""
    if name == "non-ascii":
        return spec.refuses_non_ascii
    return not spec.accepts(key)


def run(ctx: ScenarioContext) -> None:
    target = ctx.target
    # A hostile request told to try later (in progress, 429, 503) is sent again: the target
    # must judge the input itself, or the verdict on it is unknown.
    for name, header in _always_hostile(target.key).items():
        ctx.retry_until_answer(ctx.request(header, key_header=header, label=f"hostile:{name}"),
                               first_attempt=1)
    for name, key in _unusual_keys(ctx).items():
        if _hostile_by_rules(target.key, name, key):
            ctx.retry_until_answer(ctx.request(key, label=f"hostile:{name}"), first_attempt=1)
        else:
            ctx.retry_until_answer(ctx.request(key, label=f"odd-key:{name}"), first_attempt=1)
    hostile_bodies = {
        "not-json": b"amount=100&currency=usd",
        "truncated-json": b'{"amount": 100, "currency": ',
        "deeply-nested": b"[" * NESTING + b"]" * NESTING,
        "over-1-mib": b'{"pad": "' + b"x" * (1024 * 1024 + 1) + b'"}',
    }
    for name, raw in hostile_bodies.items():
        ctx.retry_until_answer(ctx.request(ctx.new_key(), raw_body=raw, label=f"hostile:{name}"),
                               first_attempt=1)
    forged = {target.promises.replay_header or "Idempotent-Replayed": "true", "X-Hit": "true"}
    ctx.retry_until_answer(ctx.request(ctx.new_key(), headers=forged, label="fake-replay"),
                           first_attempt=1)
    ctx.retry_until_answer(ctx.request(ctx.new_key(), label="control"), first_attempt=1)


SCENARIO = Scenario(
    name="bad-input",
    summary="hostile keys and bodies get a 4xx and no charge; forged replay headers change "
            "nothing",
    story=(
        "The idempotency layer sits at the very edge of the service, so it sees the worst "
        "input first: empty keys, control characters, broken quoting, keys its own rules "
        "forbid (too long, outside the declared pattern), bodies that are not JSON, JSON "
        "nested a hundred thousand levels deep, bodies of a megabyte. Each must be refused "
        "with a 4xx (the promised status for a bad key) before anything is stored or charged, "
        "and the server must still serve the next customer. A key its rules allow is a key, "
        "however odd it looks (SQL, non-ASCII, a thousand characters where no limit is "
        "declared): it must simply work, once. And a client must not be able to fake a replay "
        "by sending the replay header itself."
    ),
    properties=("P1", "P2", "P3", "P10"),
    plan=(
        "send keys that are empty, with control characters, or a structured-field string left "
        "unterminated",
        "send keys one character longer than the declared maximum (a long key, 1024 "
        "characters, when none is declared), non-ASCII, and ending in a SQL fragment: as "
        "hostile input when the declared rules reject them (non-ASCII only by a declared "
        "pattern), else as ordinary operations, until answered",
        "send bodies that are not JSON, truncated, nested 100,000 deep, and over 1 MiB",
        "send a new request carrying a forged replay header and X-Hit",
        "send an ordinary request",
        "check: the promised status (or a 4xx) and no charge for each hostile request; one "
        "charge for each accepted odd key; the forged header processed as new; the server "
        "still serving",
    ),
    run=run,
)

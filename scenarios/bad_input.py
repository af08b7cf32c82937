"""Hostile keys and bodies, and headers that pretend to be a replay."""

from __future__ import annotations

from harness import KeySpec, Scenario, ScenarioContext

NESTING = 100_000


def _hostile_keys(spec: KeySpec) -> dict[str, str]:
    keys = {
        "empty-key": "",
        "key-too-long": "k" * (spec.max_length + 1),
        "control-character": "key\x01with\x7fcontrol",
        "non-ascii": "clé-ключ-鍵",
    }
    if spec.syntax == "sf-string":
        keys["sf-string-unterminated"] = '"abc'
    return keys


def run(ctx: ScenarioContext) -> None:
    target = ctx.target
    for name, header in _hostile_keys(target.key).items():
        ctx.send(ctx.request(header, key_header=header, label=f"hostile:{name}"))
    hostile_bodies = {
        "not-json": b"amount=100&currency=usd",
        "truncated-json": b'{"amount": 100, "currency": ',
        "deeply-nested": b"[" * NESTING + b"]" * NESTING,
        "over-1-mib": b'{"pad": "' + b"x" * (1024 * 1024 + 1) + b'"}',
    }
    for name, raw in hostile_bodies.items():
        ctx.send(ctx.request(ctx.new_key(), raw_body=raw, label=f"hostile:{name}"))
    # Printable ASCII is a valid key: a SQL fragment must be stored safely, not refused.
    sql = ctx.request("'; DROP TABLE idempotency_keys; --", label="sql-fragment")
    ctx.retry_until_answer(sql, first_attempt=1)
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
        "input first: empty keys, keys longer than allowed, control characters, broken quoting, "
        "bodies that are not JSON, JSON nested a hundred thousand levels deep, bodies of a "
        "megabyte. Each must be refused with a 4xx before anything is stored or charged, and "
        "the server must still serve the next customer. A key that looks like SQL is a valid "
        "key and must simply be stored safely. And a client must not be able to fake a replay "
        "by sending the replay header itself."
    ),
    properties=("P1", "P3", "P10"),
    plan=(
        "send keys that are empty, one character too long, with control characters, non-ASCII, "
        "or a structured-field string left unterminated",
        "send bodies that are not JSON, truncated, nested 100,000 deep, and over 1 MiB",
        "send a valid key that is a SQL fragment, until answered",
        "send a new request carrying a forged replay header and X-Hit",
        "send an ordinary request",
        "check: a 4xx and no charge for each hostile request; one charge for the SQL-fragment "
        "key; the forged header processed as new; the server still serving",
    ),
    run=run,
)

"""Keys that look alike but are different keys: a store that folds case, truncates long keys or
normalises punctuation merges two operations into one, and the second client is told its charge
happened when it never did."""

from __future__ import annotations

from collections.abc import Iterator

from harness import KeySpec, Scenario, ScenarioContext

UNLIMITED_LENGTH = 255  # the longest pair sent when the target declares no maximum
PUNCTUATION = ("-", "_", ".")


def _case_pair(base: str) -> tuple[str, ...]:
    return (f"{base}-key", f"{base}-KEY")


def _long_pair(base: str, spec: KeySpec) -> tuple[str, ...]:
    """Two keys of the longest declared length that differ only in their last character: a
    store that keeps a prefix (a column too short, an index on the first n bytes) merges them."""
    length = spec.max_length or UNLIMITED_LENGTH
    prefix = f"{base}-" + "x" * max(0, length - len(base) - 2)
    return (f"{prefix}a", f"{prefix}b")


def _punctuation_group(base: str) -> tuple[str, ...]:
    return tuple(f"{base}{mark}p" for mark in PUNCTUATION)


def _groups(ctx: ScenarioContext) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(kind, keys) for each group of keys that must stay distinct; only keys the declared
    rules accept, and only groups of two or more of them."""
    spec = ctx.target.key
    for kind, keys in (("case", _case_pair(ctx.new_key())),
                       ("long-prefix", _long_pair(ctx.new_key(), spec)),
                       ("punctuation", _punctuation_group(ctx.new_key()))):
        accepted = tuple(k for k in keys if spec.accepts(k))
        if len(set(accepted)) >= 2:
            yield kind, accepted


def run(ctx: ScenarioContext) -> None:
    for kind, keys in _groups(ctx):
        # One body for the whole group: a store that merges the keys then replays the first
        # key's answer to the second (a charge that never happened, P2) instead of refusing it
        # as a reuse; a refusal on a first request is judged too (P4).
        body = ctx.body()
        for key in keys:
            request = ctx.request(key, body, label=f"distinct:{kind}")
            ctx.retry_until_answer(request, first_attempt=1, process=f"c-{kind}")


SCENARIO = Scenario(
    name="distinct-keys",
    summary="keys that differ only in case, in their last character or in punctuation are "
            "different keys: one charge each",
    story=(
        "Two clients choose keys that are nearly the same: one in upper case, one in lower "
        "case; two long keys that share everything but the last character; 'order-1' and "
        "'order_1'. To the protocol these are different keys. A store with a case-insensitive "
        "collation, a key column shorter than the keys it is sent, or a normaliser that "
        "strips punctuation makes them one key: the second client gets the first client's "
        "stored response, believes its own charge happened, and it never did; or it is "
        "refused as if it had reused the other client's key."
    ),
    properties=("P1", "P2", "P3", "P4"),
    plan=(
        "send two keys that differ only in letter case, with the same body, each until "
        "answered",
        "send two keys of the longest declared length (255 when none is declared) that differ "
        "only in the last character",
        "send keys that differ only in punctuation ('-', '_', '.')",
        "only keys the declared key rules accept are sent",
        "check: one charge per key, each key's answers name its own charge, and no key is "
        "refused as a reuse of another on its first request",
    ),
    run=run,
)

"""What key-reuse, distinct-keys and bad-input send, read from the history they record, against
a real service (``tests.scenarios.service``) behind Toxiproxy."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from harness import Event, ScenarioContext
from harness.services._toxiproxy import ToxiproxyServer
from scenarios import CATALOG, bad_input, distinct_keys, key_reuse
from tests.scenarios.deployed import completion, deployed, invokes, sent_body

TWO_OPERATIONS: dict[str, Any] = {
    "operations": [
        {"name": "charge", "path": "/charges",
         "body": {"amount": "{amount}", "meta": {"order": "{nonce}", "channel": "web"}}},
        {"name": "refund", "path": "/refunds", "body": {"amount": "{amount}"}},
        {"name": "payout", "path": "/payouts", "body": {"amount": "{amount}"},
         "key_scope": "payouts"},
    ],
}


def by_label(ctx: ScenarioContext) -> dict[str | None, Event]:
    return {e.label: e for e in invokes(ctx)}


def test_key_reuse_probes_only_declared_operations(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path, **TWO_OPERATIONS) as (ctx, _):
        key_reuse.run(ctx)
    sent = invokes(ctx)
    declared = {("POST", "/charges"), ("POST", "/refunds")}
    assert {(e.method, (e.path or "").split("?")[0]) for e in sent} <= declared
    labels = by_label(ctx)
    original = labels["original"]
    other = labels["reuse:operation:refund"]
    assert other.path == "/refunds" and other.key == original.key  # same scope; never /payouts
    # Its template has other fields, so it carries a body of its own (one /refunds accepts).
    assert set(sent_body(other)) == {"amount"}
    assert labels["reuse:query"].path == "/charges?idem_probe=1"
    assert sent_body(labels["reuse:query"]) == sent_body(original)
    nested = sent_body(labels["reuse:field:meta.order"])
    first = sent_body(original)
    assert nested["meta"]["order"] != first["meta"]["order"]
    assert {**nested, "meta": {**nested["meta"], "order": 0}} == {
        **first, "meta": {**first["meta"], "order": 0}}
    amount = sent_body(labels["reuse:field:amount"])
    assert amount["amount"] != first["amount"] and {**amount, "amount": 0} == {
        **first, "amount": 0}
    assert "reuse:field:meta.channel" not in labels  # a constant nobody declared other values for
    assert sent_body(labels["reuse:body"]) != first
    pair = [e for e in sent if e.label == "reuse:concurrent"]
    assert len(pair) == 2 and pair[0].key == pair[1].key != original.key
    assert pair[0].fingerprint != pair[1].fingerprint
    assert abs(pair[0].time - pair[1].time) < 0.05
    assert "same:reordered" in labels


def test_key_reuse_changes_one_factor_at_a_time(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """The same body on another operation whose template has the same fields, and each
    declared other value of a field alone: a fingerprint that leaves out the path or that
    field is seen only so."""
    operations = [
        {"name": "charge", "path": "/charges",
         "body": {"amount": "{amount}", "currency": "usd"},
         "valid_values": {"currency": ["usd", "eur", "gbp"]}},
        {"name": "refund", "path": "/refunds", "body": {"amount": "{amount}", "currency": "usd"}},
    ]
    with deployed(toxiproxy_server, tmp_path, operations=operations) as (ctx, _):
        key_reuse.run(ctx)
    labels = by_label(ctx)
    first = sent_body(labels["original"])
    assert sent_body(labels["reuse:operation:refund"]) == first
    assert labels["reuse:operation:refund"].path == "/refunds"
    for currency in ("eur", "gbp"):
        assert sent_body(labels[f"reuse:field:currency={currency}"]) == {
            **first, "currency": currency}
    assert "reuse:field:currency=usd" not in labels


def test_key_reuse_varies_a_top_level_field_without_nesting_and_has_no_other_operation(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path) as (ctx, _):
        key_reuse.run(ctx)
    labels = by_label(ctx)
    assert not any((label or "").startswith("reuse:operation") for label in labels)
    changed = sent_body(labels["reuse:field:amount"])
    first = sent_body(labels["original"])
    assert sum(changed[name] != first[name] for name in first) == 1
    assert {e.method for e in invokes(ctx)} == {"POST"}


def test_distinct_keys_is_registered_and_sends_pairs_that_differ_in_one_way(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    assert CATALOG["distinct-keys"] is distinct_keys.SCENARIO
    with deployed(toxiproxy_server, tmp_path,
                  key={"max_length": 64, "pattern": "[A-Za-z0-9_.-]+"}) as (ctx, _):
        distinct_keys.run(ctx)
    sent = invokes(ctx)
    groups: dict[str, set[str]] = {}
    for event in sent:
        assert event.label and event.label.startswith("distinct:")
        assert ctx.target.key.accepts(event.key or "")
        assert completion(ctx, event).status == 201  # each retried until answered
        groups.setdefault(event.label, set()).add(event.key or "")
    lower, upper = sorted(groups["distinct:case"], key=str.isupper)
    assert lower != upper and lower.lower() == upper.lower()
    first, second = sorted(groups["distinct:long-prefix"])
    assert len(first) == len(second) == 64 and first[:-1] == second[:-1]
    assert {k[-2] for k in groups["distinct:punctuation"]} == {"-", "_", "."}
    # One body per group: a store that merges two keys must replay, not refuse, to show it.
    bodies = {label: {e.body for e in sent if e.label == label} for label in groups}
    assert all(len(b) == 1 for b in bodies.values()) and len(
        set().union(*bodies.values())) == len(groups)


def test_distinct_keys_sends_only_what_the_rules_accept(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path,
                  key={"max_length": 0, "pattern": "[a-z0-9-]+"}) as (ctx, _):
        distinct_keys.run(ctx)
    labels = Counter(e.label for e in invokes(ctx))
    assert labels == Counter({"distinct:long-prefix": 2})
    assert {len(e.key or "") for e in invokes(ctx)} == {255}


def test_bad_input_calls_a_key_hostile_only_when_the_declared_rules_reject_it(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path, key={"max_length": 0}) as (ctx, _):
        bad_input.run(ctx)
    labels = {e.label for e in invokes(ctx)}
    assert {"hostile:empty-key", "hostile:control-character"} <= labels
    assert not {"hostile:key-too-long", "hostile:non-ascii", "hostile:sql-fragment"} & labels
    assert {"odd-key:long-key", "odd-key:sql-fragment"} <= labels
    # The draft's printable ASCII by default: a non-ASCII key is not sent at all, since a
    # server reading header bytes as latin-1 would store it under another spelling.
    assert "odd-key:non-ascii" not in labels


def test_bad_input_sends_a_non_ascii_key_as_ordinary_where_any_value_is_a_key(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path, key={"max_length": 0, "charset": "any"}) as (
            ctx, _):
        bad_input.run(ctx)
    labels = {e.label for e in invokes(ctx)}
    assert "odd-key:non-ascii" in labels and "hostile:non-ascii" not in labels


def test_bad_input_with_declared_length_and_pattern(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path,
                  key={"max_length": 80, "pattern": "[ -~]+"}) as (ctx, _):
        bad_input.run(ctx)
    sent = {e.label: e for e in invokes(ctx)}
    assert len(sent["hostile:key-too-long"].key or "") == 81
    assert "hostile:non-ascii" in sent and "odd-key:sql-fragment" in sent
    odd = [e for e in invokes(ctx) if (e.label or "").startswith("odd-key")]
    assert all(completion(ctx, e).status == 201 for e in odd)

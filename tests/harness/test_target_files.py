"""Target files: the built-in one loads, and bad ones fail with the file, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import TargetFileError, load_target
from harness._target import render_template

MINIMAL = """
name = "mine"
url = "http://127.0.0.1:9000"
[effects]
kind = "http"
url = "/effects"
query = { key = "{key}" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "target.toml"
    path.write_text(text)
    return path


def problems(tmp_path: Path, text: str) -> list[tuple[str, str, str]]:
    with pytest.raises(TargetFileError) as caught:
        load_target(write(tmp_path, text))
    assert str(tmp_path / "target.toml") in str(caught.value)
    return caught.value.problems


def test_the_builtin_reference_target_loads_by_name() -> None:
    target = load_target("reference")
    assert target.name == "reference-server"
    assert target.promises.retention == 86400.0
    assert {"clock", "crash", "tenants", "store-size"} <= target.capabilities()


def test_a_minimal_file_gets_the_draft_defaults(tmp_path: Path) -> None:
    target = load_target(write(tmp_path, MINIMAL))
    assert target.key.header == "Idempotency-Key"
    assert target.promises.mismatch_status == 422
    assert target.capabilities() == frozenset()


def test_missing_file_says_so() -> None:
    with pytest.raises(TargetFileError, match="does not exist"):
        load_target("/nonexistent/target.toml")


def test_broken_toml_names_the_line(tmp_path: Path) -> None:
    (_field, problem, fix), = problems(tmp_path, "name = \n")
    assert "not valid TOML" in problem and "line 1" in problem
    assert "syntax" in fix


def test_unknown_field_is_named_with_a_fix(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + "\n[promises]\nretension = '24h'\n")
    assert found[0][0] == "promises.retension"
    assert "spelling" in found[0][2]


def test_bad_choice_lists_the_allowed_values(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + "\n[promises]\nin_progress = 'queue'\n")
    assert found[0][0] == "promises.in_progress"
    assert "'conflict'" in found[0][2] and "'wait'" in found[0][2]


def test_bad_duration_explains_the_forms(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + "\n[promises]\nretention = 'a day'\n")
    assert found[0][0] == "promises.retention"
    assert "'24h'" in found[0][1]


def test_target_needs_a_place_to_run(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL.replace('url = "http://127.0.0.1:9000"\n', ""))
    assert "exactly one of `url`" in found[0][1]


def test_start_command_must_take_the_port(tmp_path: Path) -> None:
    text = MINIMAL.replace('url = "http://127.0.0.1:9000"\n', "") + (
        '\n[start]\ncommand = ["./server"]\n')
    found = problems(tmp_path, text)
    assert found[0][0] == "start"
    assert "{port}" in found[0][1]


def test_effects_kind_is_required(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL.replace('kind = "http"\n', ""))
    assert found[0][0] == "effects"
    assert 'kind = "http"' in found[0][2]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + "\n[key]\nsyntax = 'base64'\nmax_length = -1\n")
    assert {f for f, _, _ in found} == {"key.syntax", "key.max_length"}


def test_a_body_that_cannot_vary_is_refused(tmp_path: Path) -> None:
    found = problems(tmp_path, MINIMAL + '\n[endpoint]\nbody = { amount = 5 }\n')
    assert "{amount} or {nonce}" in found[0][1]


def test_templates_keep_the_type_of_a_whole_placeholder() -> None:
    body = {"amount": "{amount}", "note": "for {customer}", "items": ["{amount}"]}
    assert render_template(body, {"amount": 12, "customer": "c"}) == {
        "amount": 12, "note": "for c", "items": [12]}


STARTED = """
name = "mine"
[start]
command = ["./serve", "--port", "{port}"]
[effects]
kind = "recorder"
"""


def test_a_store_proxy_upstream_must_be_host_and_port(tmp_path: Path) -> None:
    (field, problem, _fix), = problems(
        tmp_path, STARTED + '[store_proxy]\nupstream = "postgresql://db/app"\n')
    assert field == "store_proxy" and "must be host:port" in problem


def test_a_store_port_the_start_command_does_not_pass_on_is_refused(tmp_path: Path) -> None:
    (_field, problem, _fix), = problems(
        tmp_path, STARTED + '[store_proxy]\nupstream = "127.0.0.1:{store_port}"\n')
    assert "must pass {store_port} on" in problem
    passed_on = STARTED.replace('"{port}"]', '"{port}", "--db-port", "{store_port}"]')
    target = load_target(write(tmp_path, passed_on
                               + '[store_proxy]\nupstream = "127.0.0.1:{store_port}"\n'))
    assert target.store_proxy is not None and target.store_proxy.picks_port
    assert "store-proxy" in target.capabilities()


# ---- the format of issue 13: operations, key rules, keyless counting, handler faults ----------


def test_the_complete_example_in_the_docs_is_a_valid_target_file(tmp_path: Path) -> None:
    docs = (Path(__file__).parents[2] / "docs" / "targets.md").read_text()
    example = docs.split("```toml\n", 1)[1].split("```", 1)[0]
    target = load_target(write(tmp_path, example))
    assert target.key.accepts("order-42:retry_1") and not target.key.accepts("clé")
    assert [f.name for f in target.hooks.handler_faults] == ["exception-before-work",
                                                            "exception-after-work",
                                                            "error-answer"]
    assert [f.errors for f in target.hooks.handler_faults] == [None, None, "store"]
    assert target.endpoint.valid_values and target.hooks.clock is not None
    assert target.hooks.clock.read is not None
    assert target.shares_state and "instances" in target.capabilities()


OPERATIONS = MINIMAL + """
[[operations]]
name = "charge"
path = "/charges"
body = { amount = "{amount}" }
key_scope = "payments"
[[operations]]
name = "payout"
path = "/payouts"
body = { amount = "{amount}" }
key_scope = "payments"
[[operations]]
name = "refund"
path = "/refunds"
body = { amount = "{amount}" }
key_scope = "refunds"
"""


def test_several_operations_declare_which_share_keys(tmp_path: Path) -> None:
    target = load_target(write(tmp_path, OPERATIONS))
    charge, payout, refund = target.keyed_operations
    assert target.endpoint == charge
    assert target.sharing_keys_with(charge) == (payout,)
    assert target.sharing_keys_with(refund) == ()


def test_endpoint_and_operations_together_say_what_to_change(tmp_path: Path) -> None:
    (_field, problem, _fix), = problems(tmp_path, OPERATIONS + "\n[endpoint]\npath = '/x'\n")
    assert "not both" in problem and "move [endpoint] into the list" in problem


def test_an_http_oracle_must_be_asked_per_key(tmp_path: Path) -> None:
    text = MINIMAL.replace('query = { key = "{key}" }', 'query = { tenant = "{tenant}" }')
    (field, problem, _fix), = problems(tmp_path, text)
    assert field == "effects.http" and "must pass the key" in problem


def test_keyless_counting_is_declared_not_guessed(tmp_path: Path) -> None:
    from harness._target import keyless_counting

    assert keyless_counting(load_target(write(tmp_path, MINIMAL)).effects) == "none"
    total = MINIMAL + '[effects.keyless]\nhow = "total"\nurl = "/effects/total"\ncount = "total"\n'
    assert keyless_counting(load_target(write(tmp_path, total)).effects) == "total"


def test_one_handler_fault_or_a_list_not_both(tmp_path: Path) -> None:
    text = MINIMAL + """
[hooks]
handler_error = { header = "X-F", value = "boom" }
[[hooks.handler_errors]]
name = "after"
header = "X-F"
value = "after"
"""
    (_field, problem, _fix), = problems(tmp_path, text)
    assert "either handler_error" in problem


def test_the_single_handler_error_of_older_files_still_works(tmp_path: Path) -> None:
    text = MINIMAL + '[hooks]\nhandler_error = { header = "X-F", value = "boom" }\n'
    (fault,) = load_target(write(tmp_path, text)).hooks.handler_faults
    assert (fault.name, fault.header, fault.value, fault.when) == (
        "exception", "X-F", "boom", "before-work")


def test_a_replay_is_only_the_promised_header_with_the_promised_value() -> None:
    from harness._target import Promises

    promises = Promises(replay_header="Idempotent-Replayed")
    assert promises.marks_replay({"idempotent-replayed": "true"})
    assert not promises.marks_replay({"Idempotent-Replayed": "false"})
    assert Promises(replay_header="X-Cache", replay_value="HIT").marks_replay({"x-cache": "hit"})


def test_a_key_pattern_that_is_not_a_regular_expression_is_refused(tmp_path: Path) -> None:
    (field, problem, _fix), = problems(tmp_path, MINIMAL + "[key]\npattern = '[a-z'\n")
    assert field == "key" and "not a regular expression" in problem


def test_a_misspelt_field_gets_a_did_you_mean(tmp_path: Path) -> None:
    (field, _problem, fix), = problems(tmp_path, MINIMAL + "[promises]\nretenion = '24h'\n")
    assert field == "promises.retenion" and "did you mean `retention`?" in fix


def test_the_endpoint_does_not_share_keys_with_itself(tmp_path: Path) -> None:
    target = load_target(write(tmp_path, OPERATIONS))
    assert [o.name for o in target.sharing_keys_with(target.endpoint)] == ["payout"]


# ---- the fields of issues 23 and 24 -----------------------------------------------------


def test_the_choices_the_draft_leaves_open_are_declared(tmp_path: Path) -> None:
    target = load_target(write(tmp_path, MINIMAL + """
[endpoint]
body = { amount = "{amount}", currency = "usd" }
valid_values = { currency = ["usd", "eur"] }
[key]
charset = "any"
[promises]
in_progress_status = [409, 423]
lease = "4s"
lease_renewed = true
[hooks]
clock = { path = "/clock", read = "/now", read_field = "now" }
[[hooks.handler_errors]]
name = "error-answer"
header = "X-Fault"
value = "502"
when = "error-answer"
errors = "store"
[hooks.store_size]
redis = "redis://127.0.0.1:6379/0"
pattern = "idem:*"
"""))
    assert target.endpoint.valid_values == {"currency": ["usd", "eur"]}
    assert target.key.charset == "any" and target.key.allows_non_ascii
    assert target.promises.in_progress_statuses == {409, 423}
    assert target.promises.in_progress_primary == 409
    assert target.promises.lease_renewed and not target.lease_runs_out_on_the_clock
    assert target.hooks.clock is not None and target.hooks.clock.read == "/now"
    assert target.hooks.handler_faults[0].errors == "store"
    assert target.hooks.store_size is not None and target.hooks.store_size.redis


def test_errors_in_the_wrong_table_is_told_where_it_goes(tmp_path: Path) -> None:
    [(field, _, fix)] = problems(tmp_path, MINIMAL + """
[hooks]
handler_error = { header = "X", value = "y", errors = "store" }
""")
    assert field == "hooks.handler_error.errors"
    assert "it goes in [[hooks.handler_errors]] or [promises]" in fix
    assert "did you mean" not in fix


@pytest.mark.parametrize(("table", "expected"), [
    ('[hooks.store_size]\npath = "/keys"\nsql = "select 1"', "exactly one of path"),
    ('[hooks.store_size]\nsql = "select count(*) from keys"', "give its dsn"),
    ('[hooks.store_size]\nredis = "http://127.0.0.1:6379"', "redis://"),
    ('[hooks.store_size]\npath = "/keys"\npattern = "idem:*"', "pattern goes with redis"),
    ('[endpoint]\nbody = { amount = "{amount}" }\nvalid_values = { currency = ["eur"] }',
     "does not have"),
    ('[hooks]\nclock = { path = "/clock", read = "now" }', "starting with /"),
    ('[promises]\nin_progress_status = []', "at least one status"),
])
def test_the_new_fields_refuse_what_cannot_work(tmp_path: Path, table: str,
                                                expected: str) -> None:
    found = problems(tmp_path, MINIMAL + table)
    assert any(expected in message or expected in fix for _, message, fix in found), found


def test_the_default_key_characters_are_the_draft_s(tmp_path: Path) -> None:
    key = load_target(write(tmp_path, MINIMAL)).key
    assert key.accepts("k-1 ~") and not key.accepts("k\x01") and not key.accepts("clé")
    assert not key.allows_non_ascii and not key.refuses_non_ascii  # never sent at all

"""The checker judges a service by what its target file promises, and says "unknown" where the
evidence cannot decide (issue 13).  Each test is a history a correct third-party service really
produced and that the checker once turned into a false finding, or a real flaw that a fix must
not hide."""

from __future__ import annotations

import pytest

from harness._target import KeySpec
from harness.evidence._oracle import _checked_count
from tests.harness.stories import JSON, REFERENCE_PROMISES, Story, replayed

CHARGES = (("POST", "/charges"),)
FALSE_MARKER = {"idempotent-replayed": "false", "content-type": "application/json"}


def findings(story: Story, prop: str, **options: object) -> list[str]:
    result = story.check(prop, **options)  # type: ignore[arg-type]
    return [f.message for f in result.findings]


# ---- reuse only on declared operations (false finding 1) --------------------------------


def test_a_reuse_on_a_route_the_target_does_not_declare_proves_nothing() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1")
    story.attempt("k1", 404, attempt=2, fingerprint="fp-path", path="/charges/reuse")
    story.attempt("k1", 405, attempt=3, fingerprint="fp-put", method="PUT")
    assert findings(story, "P4", operations=CHARGES) == []


def test_a_reuse_on_a_declared_operation_is_still_judged() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1")
    story.attempt("k1", 201, attempt=2, fingerprint="fp-payout", path="/payouts",
                  resource="po_1")
    [message] = findings(story, "P4", operations=(*CHARGES, ("POST", "/payouts")))
    assert "another operation (POST /payouts" in message and "a new execution" in message


def _query_reuse() -> Story:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1")
    story.attempt("k1", 201, attempt=2, fingerprint="fp-query", path="/charges?capture=false",
                  resource="ch_1", digest="d1")
    return story


def test_a_changed_query_string_is_another_request_when_the_target_says_so() -> None:
    promises = REFERENCE_PROMISES.model_copy(update={"query_in_fingerprint": True})
    [message] = findings(_query_reuse(), "P4", operations=CHARGES, promises=promises)
    assert "another query string (capture=false" in message


def test_a_changed_query_string_replayed_is_no_p4_finding_by_default() -> None:
    """The seed's fingerprint is method, path and body: a replay is what it promises."""
    assert findings(_query_reuse(), "P4", operations=CHARGES) == []


def test_a_reuse_before_anything_was_stored_is_not_judged() -> None:
    """The original was refused for its body and not stored (Stripe's rule): the key is free."""
    story = Story()
    story.attempt("k1", 400, digest="bad-body")
    story.attempt("k1", 201, attempt=2, fingerprint="fp-fixed", resource="ch_1")
    assert findings(story, "P4", operations=CHARGES) == []


def test_409_for_a_mismatch_is_honoured_when_promised() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1")
    story.attempt("k1", 409, attempt=2, fingerprint="fp-other")
    promises = REFERENCE_PROMISES.model_copy(update={"mismatch_status": 409})
    result = story.check("P4", promises=promises)
    assert result.results["P4"].verdict == "pass"


# ---- keyless effects (false finding 2) ---------------------------------------------------


def test_keyless_charges_that_cannot_be_counted_are_judged_by_status_only() -> None:
    story = Story()
    story.attempt(None, 400)
    story.attempt(None, 400, attempt=2)
    result = story.check("P7", keyless="none")
    assert result.results["P7"].verdict == "pass"
    assert any("could not be counted" in n.message for n in result.notes)


def test_a_total_is_read_as_the_difference_around_one_keyless_request() -> None:
    story = Story()
    story.total(57)  # every charge so far, most of them keyed
    story.attempt(None, 400)
    story.total(57)
    assert findings(story, "P7", keyless="total") == []


def test_a_total_that_grows_around_a_refused_keyless_request_is_a_finding() -> None:
    story = Story()
    story.total(57)
    story.attempt(None, 400)
    story.total(58)
    [message] = findings(story, "P7", keyless="total")
    assert "changed the target's total of charges by 1 where 0 was expected" in message


def test_a_total_is_no_evidence_when_another_request_overlapped() -> None:
    story = Story()
    story.total(10)
    keyless = story.invoke(None)
    story.attempt("k1", 201, resource="ch_1")
    story.answer(keyless, 400)
    story.total(11)
    result = story.check("P7", keyless="total")
    assert result.results["P7"].verdict == "unknown"
    assert "other request(s) ran while it did" in (result.results["P7"].reason or "")


# ---- 4xx not stored, replay marker value (false findings 3 and 4) -------------------------


def test_a_validation_error_answered_twice_is_not_a_replay() -> None:
    story = Story()
    story.attempt("k1", 400, digest="invalid-amount", headers=JSON)
    story.attempt("k1", 400, attempt=2, digest="invalid-amount", headers=JSON)
    assert findings(story, "P3") == []


def test_a_stored_validation_error_must_be_marked_as_replayed() -> None:
    story = Story()
    story.attempt("k1", 400, digest="invalid-amount", headers=JSON)
    story.attempt("k1", 400, attempt=2, digest="invalid-amount", headers=JSON)
    promises = REFERENCE_PROMISES.model_copy(update={"validation_errors": "stored"})
    [message] = findings(story, "P3", promises=promises)
    assert "no Idempotent-Replayed header" in message


def test_two_refusals_of_a_reused_key_are_not_a_replay() -> None:
    story = Story()
    story.attempt("k1", 422, digest="mismatch", headers=JSON)
    story.attempt("k1", 422, attempt=2, digest="mismatch", headers=JSON)
    assert findings(story, "P3") == []


def test_a_replay_header_saying_false_on_a_fresh_answer_is_not_a_replay() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1", headers=FALSE_MARKER)
    story.attempt("k1", 201, attempt=2, resource="ch_1", digest="d1", headers=replayed())
    assert findings(story, "P3") == []


def test_a_replay_saying_false_is_a_replay_the_client_cannot_recognise() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1", headers=FALSE_MARKER)
    story.attempt("k1", 201, attempt=2, resource="ch_1", digest="d1", headers=FALSE_MARKER)
    [message] = findings(story, "P3")
    assert "Idempotent-Replayed: false where the target promises 'true'" in message


def test_a_forged_replay_header_is_processed_when_the_answer_says_false() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", headers=FALSE_MARKER, label="fake-replay")
    story.effects("k1", 1, ids=["ch_1"])
    assert findings(story, "P10") == []


def test_a_forged_replay_header_echoed_back_is_named_for_what_happened() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", headers=replayed(), label="fake-replay")
    story.effects("k1", 1, ids=["ch_1"])
    [message] = findings(story, "P10")
    assert "was processed (one charge), but its answer is marked as a replay" in message


# ---- leases longer than the retries (false finding 5) ------------------------------------


def test_a_key_in_progress_before_the_lease_ran_out_is_unknown_not_stuck() -> None:
    story = Story()
    story.attempt("k1", None)
    story.crash()
    story.attempt("k1", 409, attempt=2)
    story.attempt("k1", 409, attempt=3)
    story.effects("k1", 0)
    result = story.check("P9")
    assert result.results["P9"].verdict == "unknown"
    assert "before the promised lease of 30s ran out" in (result.results["P9"].reason or "")


def test_retries_past_the_lease_that_never_get_an_answer_are_a_finding() -> None:
    story = Story()
    story.attempt("k1", None)
    story.crash()
    story.clock(20)
    story.attempt("k1", 503, attempt=2)
    story.clock(20)
    story.attempt("k1", 503, attempt=3)
    story.effects("k1", 0)
    [message] = findings(story, "P9")
    assert "never got an answer" in message


# ---- attribution (false finding 7) -------------------------------------------------------


def test_without_ids_the_tenant_that_received_the_other_response_is_blamed() -> None:
    story = Story()
    story.attempt("shared", 201, tenant="alice", resource="ch_a", digest="da")
    story.attempt("shared", 201, tenant="bob", resource="ch_a", digest="da", fingerprint="fp-b")
    story.effects("shared", 1, tenant="alice")
    story.effects("shared", 0, tenant="bob")
    [message] = findings(story, "P8")
    assert message.startswith("bob/shared received the stored response of alice/shared")
    assert "its own request was never executed" in message


def test_p1_explains_concurrent_first_attempts_as_such() -> None:
    story = Story()
    first = story.invoke("k1")
    second = story.invoke("k1", attempt=1)
    story.answer(first, 201, resource="ch_1")
    story.answer(second, 201, resource="ch_2")
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    [message] = findings(story, "P1")
    assert "ran at the same time were each executed" in message
    assert "A retry was executed again" not in message


def test_p1_explains_a_retry_that_ran_again() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    story.attempt("k1", 201, attempt=2, resource="ch_2")
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    [message] = findings(story, "P1")
    assert "A retry that came after the first charge was answered was executed again" in message


# ---- key rules (flaw 5) and a service that exits (flaw 6) --------------------------------


def test_a_bad_key_refused_with_another_status_than_promised_is_a_finding() -> None:
    story = Story()
    story.attempt("k" * 65, 422, label="hostile:key-too-long")
    story.effects("k" * 65, 0)
    rules = KeySpec(max_length=64, invalid_status=400)
    [message] = findings(story, "P10", key=rules)
    assert "got 422 where the target promises 400" in message


def test_a_bad_key_that_is_charged_is_a_finding_whatever_its_status() -> None:
    story = Story()
    story.attempt("k" * 65, 400, label="hostile:key-too-long")
    story.effects("k" * 65, 1)
    [message] = findings(story, "P10", key=KeySpec(max_length=64))
    assert "caused 1 charge(s)" in message


def test_a_service_that_exits_by_itself_is_a_finding_of_its_own() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    story.exit(1, "store-outage")
    [message] = findings(story, "P10")
    assert message.startswith("the service exited with code 1 during store-outage")


# ---- an oracle that cannot count (issue 14, item 4) ---------------------------------------


@pytest.mark.parametrize("answer", [-1, 1.5, "many", None, True])
def test_a_count_that_is_not_a_non_negative_integer_is_an_oracle_error(answer: object) -> None:
    with pytest.raises(ValueError):
        _checked_count(answer)


def test_a_count_as_a_digit_string_is_read() -> None:
    assert _checked_count("3") == 3


def test_a_count_below_the_resources_answered_makes_p1_unknown() -> None:
    """A service with no idempotency answered two charges; an oracle that says 1 cannot be
    believed, so P1 must not pass."""
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    story.attempt("k1", 201, attempt=2, resource="ch_2")
    story.effects("k1", 1)
    result = story.check("P1")
    assert result.results["P1"].verdict == "unknown"
    assert "the count cannot be trusted" in (result.results["P1"].reason or "")


# ---- handler errors (flaw 4) and keys that must stay distinct (flaw 2) ----------------------


def test_a_key_stuck_in_progress_after_a_handler_error_is_a_safety_finding() -> None:
    story = Story()
    story.attempt("k1", 500, label="handler:exception-before-work")
    story.clock(60)  # past the 30 s lease
    story.attempt("k1", 409, attempt=2, label="retry")
    story.attempt("k1", 409, attempt=3, label="retry")
    story.effects("k1", 0)
    result = story.check("P9")
    [finding] = result.findings
    assert finding.klass == "safety" and "stuck for good" in finding.message
    assert "handler error (exception-before-work)" in finding.message


def test_a_handler_error_whose_retry_runs_once_is_fine() -> None:
    story = Story()
    story.attempt("k1", 500, label="handler:exception-before-work")
    story.attempt("k1", 201, attempt=2, label="retry", resource="ch_1")
    story.effects("k1", 1, ids=["ch_1"])
    assert findings(story, "P9") == [] and findings(story, "P3") == []


def test_a_released_error_that_is_replayed_is_a_conformance_finding() -> None:
    story = Story()
    story.attempt("k1", 500, label="handler:error-answer", digest="boom")
    story.attempt("k1", 500, attempt=2, label="retry", digest="boom")
    story.attempt("k1", 500, attempt=3, label="retry", digest="boom")
    story.effects("k1", 0)
    [message] = findings(story, "P3")
    assert "got the same 500 back" in message and "errors = \"release\"" in message


def test_a_stored_error_replayed_is_what_store_promises() -> None:
    story = Story()
    story.attempt("k1", 500, label="handler:error-answer", digest="boom")
    story.attempt("k1", 500, attempt=2, label="retry", digest="boom",
                  headers={"idempotent-replayed": "true"})
    story.effects("k1", 0)
    promises = REFERENCE_PROMISES.model_copy(update={"errors": "store"})
    assert findings(story, "P3", promises=promises) == []


def test_a_new_key_refused_as_a_reuse_on_its_first_request_is_a_finding() -> None:
    story = Story()
    story.attempt("order-abc-key", 201, resource="ch_1")
    story.attempt("order-abc-KEY", 422, fingerprint="fp-a")
    story.effects("order-abc-key", 1, ids=["ch_1"])
    story.effects("order-abc-KEY", 0)
    [message] = findings(story, "P4")
    assert "refused with 422 on its very first request" in message
    assert "'order-abc-key'" in message


def test_a_key_that_lost_a_race_with_itself_is_not_refused_at_once() -> None:
    story = Story()
    first = story.invoke("k1", fingerprint="fp-a")
    second = story.invoke("k1", fingerprint="fp-b")
    story.answer(first, 422)
    story.answer(second, 201, resource="ch_1")
    story.effects("k1", 1, ids=["ch_1"])
    assert findings(story, "P4") == []


def test_an_empty_key_processed_as_no_key_is_fine_in_lax_mode() -> None:
    story = Story()
    story.attempt("", 201, resource="ch_1", label="hostile:empty-key", key_header="")
    story.effects("", 0)
    lax = REFERENCE_PROMISES.model_copy(update={"mode": "lax"})
    assert findings(story, "P10", promises=lax) == []
    assert findings(story, "P10") != []  # strict: an empty key must be refused


def test_a_forged_replay_header_is_judged_once_per_key_by_its_last_answer() -> None:
    story = Story()
    story.attempt("k1", None, label="fake-replay")
    story.attempt("k1", 409, attempt=2, label="fake-replay")
    story.attempt("k1", 409, attempt=3, label="fake-replay")
    story.effects("k1", 0)
    [message] = findings(story, "P10")
    assert "attempt 3: 409" in message


def test_the_recorder_counts_a_utf8_key_reported_in_latin1() -> None:
    import httpx

    from harness.evidence._oracle import RecorderOracle
    from harness.services._recorder import Recorder

    oracle = RecorderOracle(Recorder())
    try:
        key = "order-clé-鍵"
        seen_by_node = key.encode().decode("latin-1")
        httpx.post(oracle.recorder.url + "/effects",
                   json={"tenant": "t1", "key": seen_by_node, "id": "ch_1"})
        assert oracle.count("t1", key).count == 1
    finally:
        oracle.close()


def test_an_effects_url_elsewhere_is_allowed_only_with_allow_remote() -> None:
    from harness._errors import HarnessError
    from harness._target import HttpEffects
    from harness.evidence._oracle import HttpOracle

    spec = HttpEffects(kind="http", url="/effects", query={"key": "{key}"})
    with pytest.raises(HarnessError):
        HttpOracle(spec, base_url="http://192.0.2.7:8000")
    HttpOracle(spec, base_url="http://192.0.2.7:8000", allow_remote=True).close()

"""The last false findings of ``run`` on services built on published libraries, and the flaws
they hid (issue 24).  Each history is one a correct service really produced and the checker
once turned into a finding, or a flaw a fix must not hide."""

from __future__ import annotations

from harness._history import Event
from harness._target import KeySpec, Promises
from harness.judging._analysis import is_final
from tests.harness.stories import JSON, REFERENCE_PROMISES, Story, replayed


def findings(story: Story, *props: str, **options: object) -> list[str]:
    result = story.check(*props, **options)  # type: ignore[arg-type]
    return [f"{f.property}: {f.message}" for f in result.findings]


# ---- 1: non-ASCII keys -----------------------------------------------------------------------


def test_a_non_ascii_key_the_oracle_cannot_find_is_unknown_not_a_lost_outcome() -> None:
    story = Story()
    story.attempt("k-clé", 201, resource="ch_1", headers=JSON)
    story.effects("k-clé", 0)
    result = story.check("P2")
    assert result.findings == [] and result.results["P2"].verdict == "unknown"
    assert "latin-1" in (result.results["P2"].reason or "")


def test_an_ascii_key_answered_but_never_charged_is_still_a_lost_outcome() -> None:
    story = Story()
    story.attempt("k-cle", 201, resource="ch_1", headers=JSON)
    story.effects("k-cle", 0)
    assert [m.split(":")[0] for m in findings(story, "P2")] == ["P2"]


# ---- 2: control characters -------------------------------------------------------------------


def test_a_control_character_key_accepted_where_any_value_is_a_key_is_a_note() -> None:
    story = Story()
    story.attempt("key\x01x", 201, label="hostile:control-character", resource="ch_1",
                  key_header="key\x01x")
    story.effects("key\x01x", 1, ids=["ch_1"])
    anything = KeySpec(charset="any", max_length=0)
    result = story.check("P10", key=anything)
    assert result.findings == [] and any("RFC 9110" in n.message for n in result.notes)
    assert findings(story, "P10", key=KeySpec(max_length=0)), "the draft's characters refuse it"


# ---- 3: stored errors, per fault -------------------------------------------------------------


def test_retries_that_get_the_stored_error_replayed_have_converged() -> None:
    """A library releases the key on an exception but stores a 5xx its handler returns: the
    error answer's retries get that 502 replayed, with no charge."""
    story = Story()
    story.attempt("k1", 502, label="handler:error-answer", digest="bad-gateway")
    for attempt in (2, 3):
        story.attempt("k1", 502, attempt=attempt, label="retry", digest="bad-gateway",
                      headers={"idempotent-replayed": "true"})
    story.effects("k1", 0)
    per_fault = {"error-answer": "store"}
    assert findings(story, "P9", "P3", "P2", handler_errors=per_fault) == []
    # Under the promised release, the same history is a replayed error.
    assert [m.split(":")[0] for m in findings(story, "P3")] == ["P3"]


def test_a_stored_error_is_a_final_answer_for_the_fault_that_stores_it() -> None:
    event = Event(index=1, type="fail", f="request", process="c0", time=0.0, op=1, status=502)
    assert not is_final(event, REFERENCE_PROMISES)
    assert is_final(event, REFERENCE_PROMISES, errors="store")


# ---- 4: a 500 during a store outage -----------------------------------------------------------


def test_a_500_during_a_store_outage_that_charged_nothing_is_a_note() -> None:
    story = Story()
    story.fault("store-down", where="store")
    story.attempt("k1", 500)
    story.heal("store-down", where="store")
    story.attempt("k1", 201, attempt=2, resource="ch_1", headers=JSON)
    story.effects("k1", 1, ids=["ch_1"])
    result = story.check("P9")
    assert result.findings == [] and any("only the wrong status" in n.message
                                         for n in result.notes)


def test_a_500_during_a_store_outage_behind_which_a_charge_exists_is_a_finding_once_shown_lost(
) -> None:
    """A charge behind the 500 is lost to the client only if a retry after the outage settles
    without it; with no such retry, a careful client's retry might still find it: unknown (a
    correct service whose commit applied while its reply was lost was reported here)."""
    story = Story()
    story.fault("store-down", where="store")
    story.attempt("k1", 500)
    story.heal("store-down", where="store")
    story.effects("k1", 1, ids=["ch_1"])
    result = story.check("P9")
    assert result.findings == [] and result.results["P9"].verdict == "unknown"
    story.attempt("k1", 500, attempt=2, headers={"idempotent-replayed": "true"})
    stored = REFERENCE_PROMISES.model_copy(update={"errors": "store"})
    assert any("must answer 503" in m for m in findings(story, "P9", promises=stored))


# ---- 6: other in-progress statuses ------------------------------------------------------------


LOCKED = REFERENCE_PROMISES.model_copy(update={"in_progress_status": (423,),
                                              "retry_after": False})


def test_423_is_in_progress_where_the_target_says_so() -> None:
    assert Promises(in_progress_status=[409, 423]).in_progress_statuses == {409, 423}
    locked = Event(index=1, type="fail", f="request", process="c0", time=0.0, op=1, status=423)
    assert not is_final(locked, LOCKED) and is_final(locked, REFERENCE_PROMISES)
    story = Story()
    original = story.invoke("k1")
    story.attempt("k1", 423, attempt=2, label="in-flight-retry")
    story.answer(original, 201, resource="ch_1", headers=JSON)
    story.effects("k1", 1, ids=["ch_1"])
    assert findings(story, "P5", "P2", promises=LOCKED) == []
    assert findings(story, "P5"), "423 where 409 is promised is still a finding"


# ---- 12: a cached 5xx under release, whatever the later retries got ---------------------------


def test_a_returned_5xx_replayed_under_release_is_caught_though_retries_then_get_422() -> None:
    story = Story()
    story.attempt("k1", 503, label="handler:error-answer", digest="unavailable")
    story.attempt("k1", 503, attempt=2, label="retry", digest="unavailable",
                  headers={"idempotent-replayed": "true"})
    story.attempt("k1", 422, attempt=3, label="retry")
    story.effects("k1", 0)
    assert any(m.startswith("P3: after the handler failed with 503")
               for m in findings(story, "P3"))


# ---- 13: a 2xx while the original runs --------------------------------------------------------


def test_a_placeholder_2xx_while_the_original_runs_is_a_p5_finding_naming_its_body() -> None:
    story = Story()
    original = story.invoke("k1")
    placeholder = story.invoke("k1", attempt=2, label="in-flight-retry")
    story.history.complete(placeholder, "ok", status=200, body_digest="empty", body="{}",
                           headers=replayed())
    story.history.complete(original, "ok", status=201, resource="ch_1", body_digest="d1",
                           body='{"id": "ch_1"}', headers=JSON)
    story.effects("k1", 1, ids=["ch_1"])
    [message] = findings(story, "P5")
    assert "got 200 '{}' marked as a replay" in message and "made up" in message


def test_the_original_s_own_answer_replayed_before_it_arrived_is_no_placeholder() -> None:
    """The original committed; its answer was held on the way; the retry got it replayed."""
    story = Story()
    original = story.invoke("k1")
    story.attempt("k1", 201, attempt=2, resource="ch_1", digest="d1", headers=replayed())
    story.answer(original, 201, resource="ch_1", digest="d1", headers=JSON)
    story.effects("k1", 1, ids=["ch_1"])
    assert findings(story, "P5") == []


def test_a_key_refused_because_its_own_other_body_raced_it_is_no_cross_tenant_refusal() -> None:
    """The explorer's overlap: a request and, a millisecond later, the same key with another
    body; the second claims the key first and the first is refused as a reuse.  Then the
    other tenant sends the key: nothing says keys are not scoped per tenant."""
    story = Story()
    first = story.invoke("k1", tenant="a")
    story.attempt("k1", 201, tenant="a", attempt=2, fingerprint="fp-b", resource="ch_1",
                  headers=JSON)
    story.answer(first, 422)
    story.attempt("k1", 201, tenant="b", resource="ch_2", headers=JSON)
    story.effects("k1", 1, tenant="a", ids=["ch_1"])
    story.effects("k1", 1, tenant="b", ids=["ch_2"])
    assert findings(story, "P8") == []


def test_a_key_refused_on_its_first_request_after_another_tenant_used_it_is_a_leak() -> None:
    story = Story()
    story.attempt("k1", 201, tenant="a", resource="ch_1", headers=JSON)
    story.attempt("k1", 422, tenant="b")
    story.effects("k1", 1, tenant="a", ids=["ch_1"])
    story.effects("k1", 0, tenant="b", ids=[])
    assert any("not scoped per tenant" in m for m in findings(story, "P8"))


def test_nothing_charged_yet_while_a_request_of_the_key_still_runs_is_no_lost_outcome() -> None:
    """The explorer judges after every step: a placeholder 2xx came, the original still runs
    and has not charged yet.  That is P5's to say; whether the outcome is lost, only the end
    can tell."""
    story = Story()
    story.invoke("k1")  # still running
    story.attempt("k1", 200, attempt=2, headers=replayed())
    story.effects("k1", 0)
    assert findings(story, "P2") == []


def test_a_first_request_that_replays_its_own_commit_after_a_store_cut_is_no_early_replay(
) -> None:
    """Issue 27's store proxy cut the acknowledgement of a commit: the service retried, found
    the answer it had stored, and replayed it to this very first request."""
    story = Story()
    original = story.invoke("k1")
    story.fault("cut-after-write", where="store")
    story.heal("cut-after-write", where="store")
    story.answer(original, 201, resource="ch_1", headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])
    assert findings(story, "P3") == []
    early = Story()
    early.attempt("k1", 201, resource="ch_1", headers=replayed())
    early.effects("k1", 1, ids=["ch_1"])
    assert any("nothing was stored yet" in m for m in findings(early, "P3"))


def test_hostile_input_told_to_try_later_was_never_judged() -> None:
    """django-idempotency-key's storage lock answers 423 to any request while another holds
    it: a hostile body answered so was neither accepted nor refused."""
    story = Story()
    story.attempt("k1", 423, label="hostile:not-json")
    story.effects("k1", 0)
    result = story.check("P10", promises=LOCKED)
    assert result.findings == [] and result.results["P10"].verdict == "unknown"

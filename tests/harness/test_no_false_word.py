"""No false word in a verdict (issue 38, items 1 to 4), on hand-built histories: each story is
the one a real run recorded on a correct service, or on a flawed one where a second property
came out that the evidence does not show.

- item 1: a store whose expiry is in whole seconds (Redis ``EXPIRE``/``SETEX``) keeps a record
  up to a second past its retention, which is no P11; the finding says how far past it a key
  was seen;
- item 2: after a restart that left the target's clock unknown (no ``read``, no
  ``restart_resets``), no verdict that depends on elapsed time is a finding;
- item 3: a 5xx answered while the harness faulted the store is never the operation's stored
  answer, whatever ``errors`` says;
- item 4: a property is reported only with evidence for it, in words that name what happened.
"""

from __future__ import annotations

from harness._history import NEMESIS
from harness._target import Promises
from tests.harness.stories import JSON, REFERENCE_PROMISES, Story, replayed

STORED = REFERENCE_PROMISES.model_copy(update={"errors": "store", "lease": None})


def _mechanisms(result: object, prop: str) -> list[str]:
    return [f.mechanism for f in result.results[prop].findings]  # type: ignore[attr-defined]


# ---- item 1: expiry in whole seconds -------------------------------------------------------

def _aged_key(seen_past: float, *, granularity: float | None = None) -> Story:
    """One key, then the clock moved a whole retention on (in two halves) plus ``seen_past``
    seconds, with the key still in the table."""
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    story.clock(43200)
    story.store_size(1)
    story.clock(43200 + seen_past)
    story.store_size(1)
    return story


def test_a_record_seen_within_a_second_past_its_retention_is_no_p11() -> None:
    result = _aged_key(0.4).check("P11")
    assert result.results["P11"].verdict == "pass", result.findings


def test_a_record_seen_long_past_its_retention_says_how_long() -> None:
    result = _aged_key(7200).check("P11")
    (finding,) = result.results["P11"].findings
    assert finding.mechanism == "expired-keys-kept"
    assert "2h past" in finding.message, finding.message


def test_a_store_declared_coarser_is_allowed_its_granularity() -> None:
    coarse = REFERENCE_PROMISES.model_copy(update={"expiry_granularity": 3 * 3600.0})
    assert _aged_key(7200).check("P11", promises=coarse).results["P11"].verdict == "pass"


def test_the_granularity_is_a_target_file_setting(tmp_path: object) -> None:
    from pathlib import Path

    from harness import load_target

    path = Path(str(tmp_path)) / "target.toml"
    path.write_text('name = "x"\nurl = "http://127.0.0.1:9000"\n[effects]\nkind = "http"\n'
                    'url = "/e"\nquery = { key = "{key}" }\n[promises]\nretention = "24h"\n'
                    'expiry_granularity = "1m"\n')
    assert load_target(path).promises.expiry_granularity == 60.0
    assert Promises().expiry_granularity == 1.0


# ---- item 2: a restart the target file does not describe -----------------------------------

def _restart_with_the_clock_unknown(story: Story) -> None:
    story.history.record("info", "crash", NEMESIS, value={"how": "SIGKILL"})
    story.history.record("info", "restart", NEMESIS, value={
        "instance": 0, "clock": "unknown",
        "clock_reason": "the clock had been moved 3600 s and nothing says whether the restart "
                        "put it back: declare [hooks.clock] read (a path answering its time) "
                        "or restart_resets"})


def test_a_key_in_progress_past_the_lease_after_an_unknown_restart_is_unknown() -> None:
    """The explorer's story on a memory-clock service whose file says neither read nor
    restart_resets: the clock jumped, the claim was made, the target was killed and restarted
    with its clock back at real time; the harness, counting the jump, took the lease for long
    passed and called the key stuck for good (P9, safety)."""
    story = Story()
    story.clock(3600)
    original = story.invoke("k1")
    _restart_with_the_clock_unknown(story)
    story.lose(original, "server disconnected")
    story.clock(40)  # past the 30 s lease by the harness's account, not by the target's
    story.attempt("k1", 409, attempt=2)
    story.attempt("k1", 409, attempt=3)
    story.effects("k1", 0)
    result = story.check("P9")
    assert result.results["P9"].findings == (), result.findings
    assert result.results["P9"].verdict == "unknown"
    reason = result.results["P9"].reason or ""
    assert "restart_resets" in reason and "read" in reason, reason


def test_a_key_stuck_past_the_lease_with_the_clock_known_is_still_p9() -> None:
    story = Story()
    story.clock(3600)
    original = story.invoke("k1")
    story.history.record("info", "crash", NEMESIS, value={"how": "SIGKILL"})
    story.history.record("info", "restart", NEMESIS, value={"instance": 0, "clock": "restored"})
    story.lose(original, "server disconnected")
    story.clock(40)
    story.attempt("k1", 409, attempt=2)
    story.effects("k1", 0)
    assert _mechanisms(story.check("P9"), "P9") == ["stuck"]


def test_expired_keys_after_an_unknown_restart_are_unknown_not_p11() -> None:
    story = Story()
    story.clock(600)
    story.attempt("k1", 201, resource="ch_1")
    _restart_with_the_clock_unknown(story)
    story.clock(86400 + 3600)
    story.store_size(1)
    result = story.check("P11")
    assert result.results["P11"].verdict == "unknown", result.findings


def test_a_second_charge_past_the_retention_after_an_unknown_restart_is_unknown() -> None:
    """The contract allows a new charge once the retention has passed, but only the target's
    clock says whether it has: after an unknown restart it may not have."""
    story = Story()
    story.clock(600)
    story.attempt("k1", 201, resource="ch_1")
    _restart_with_the_clock_unknown(story)
    story.clock(86400 + 60)
    story.attempt("k1", 201, resource="ch_2", attempt=2)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    result = story.check("P1")
    assert result.results["P1"].verdict == "unknown", result.notes


def test_a_retention_measured_across_an_unknown_restart_is_not_measured() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    _restart_with_the_clock_unknown(story)
    story.clock(86400 - 60)
    story.attempt("k1", 201, resource="ch_1", attempt=2, label="retention-probe:inside",
                  headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])
    result = story.check("P6")
    assert result.results["P6"].verdict == "unknown", result.notes
    assert not any(n.message.startswith("effective retention measured") for n in result.notes)


# ---- item 3: a 5xx while the store was faulted ---------------------------------------------

def test_a_500_answered_while_the_store_was_cut_is_not_the_stored_answer() -> None:
    """errors = "store": the 500 came from the failing store, not from the handler; the retry
    then got the stored 201, and that was no unfaithful replay (P3)."""
    story = Story()
    story.fault("cut-after-write", where="store")
    cut = story.invoke("k1")
    story.heal("cut-after-write", where="store")
    story.answer(cut, 500)
    story.attempt("k1", 201, resource="ch_1", attempt=2, headers=JSON)
    story.attempt("k1", 201, resource="ch_1", attempt=3, headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])
    result = story.check(promises=STORED)
    assert result.results["P3"].verdict == "pass", result.findings
    assert result.results["P2"].verdict == "pass", result.findings


def test_a_key_stuck_in_progress_after_a_cut_is_p9_not_a_note_that_it_did_not_stick() -> None:
    story = Story()
    story.fault("cut-after-write", where="store")
    cut = story.invoke("k1")
    story.heal("cut-after-write", where="store")
    story.answer(cut, 500)
    for attempt in range(2, 6):
        story.attempt("k1", 409, attempt=attempt)
    story.effects("k1", 0)
    result = story.check("P9", promises=STORED)
    assert result.results["P9"].verdict == "fail", result.notes
    assert not any("did not stick" in n.message for n in result.notes), result.notes


def test_a_500_during_a_cut_with_a_charge_behind_it_that_a_retry_replays_is_a_note() -> None:
    """The explorer's one-step story on a correct service: the link cut right after the write
    that committed the charge and its stored answer together, the service answering 500.  The
    explorer now retries such a key (the 500 is the failing store's, not a final answer), and
    the retry's replay names the charge: the 500 is only the wrong status."""
    story = Story()
    story.fault("cut-after-write", where="store")
    cut = story.invoke("k1")
    story.heal("cut-after-write", where="store")
    story.answer(cut, 500)
    story.attempt("k1", 201, resource="ch_1", attempt=2, headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])
    result = story.check("P9", promises=STORED)
    assert result.results["P9"].verdict == "pass", result.findings
    assert any("a retry got a final answer" in n.message for n in result.notes), result.notes


# ---- item 4: second properties that are not there ------------------------------------------

def test_a_replay_that_arrived_before_the_original_under_load_is_no_p5() -> None:
    """The retry got the stored answer (the same charge) a moment before the original's own
    answer arrived: nothing was made up while the work ran."""
    story = Story()
    original = story.invoke("k1")
    retry = story.invoke("k1", attempt=2)
    story.answer(retry, 201, resource="ch_1", digest="replayed-body", headers=replayed())
    story.answer(original, 201, resource="ch_1", digest="original-body")
    story.effects("k1", 1, ids=["ch_1"])
    result = story.check("P5", "P3")
    assert result.results["P5"].findings == (), result.findings
    assert _mechanisms(result, "P3") == ["replay-body-differs"]  # the flaw that is there


def test_a_retention_probe_answered_with_the_same_charge_was_not_forgotten() -> None:
    """Only one charge was ever made: the probe 23h 59m on got the stored charge back (in a
    body the replay changed), which is no forgotten key (P6)."""
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="original-body")
    story.clock(86340)
    story.attempt("k1", 201, resource="ch_1", digest="replayed-body", attempt=2,
                  label="retention-probe:inside", headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])
    result = story.check("P6")
    assert result.results["P6"].findings == (), result.findings


def test_a_retention_probe_without_a_resource_but_one_charge_was_not_forgotten() -> None:
    story = Story()
    story.attempt("k1", 201, digest="original-body")
    story.clock(86340)
    story.attempt("k1", 201, digest="other-body", attempt=2, label="retention-probe:inside")
    story.effects("k1", 1)
    assert story.check("P6").results["P6"].findings == ()


def test_a_retention_probe_charged_again_is_still_p6() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    story.clock(3600)
    story.attempt("k1", 201, resource="ch_2", attempt=2, label="retention-probe:inside")
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    assert _mechanisms(story.check("P6"), "P6") == ["forgotten-within-retention"]


def test_a_reuse_refused_with_422_that_charged_is_named_and_is_also_p4() -> None:
    """The second charge came from a request reusing the key with another body, answered 422:
    P1's words blamed "a retry", and P4 (a refused reuse must cause no effect) was missed."""
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    story.attempt("k1", 422, attempt=2, fingerprint="fp-b")
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    result = story.check("P1", "P4")
    (p1,) = result.results["P1"].findings
    assert p1.mechanism == "reuse-charged"
    assert "retry" not in p1.message and "422" in p1.message, p1.message
    assert _mechanisms(result, "P4") == ["reuse-refused-but-charged"]


def test_a_second_charge_behind_a_lost_answer_does_not_blame_the_refused_reuse() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1")
    story.attempt("k1", None, attempt=2)  # lost: it may have charged
    story.attempt("k1", 422, attempt=3, fingerprint="fp-b")
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    result = story.check("P1", "P4")
    assert _mechanisms(result, "P1") != ["reuse-charged"]
    assert result.results["P4"].findings == ()

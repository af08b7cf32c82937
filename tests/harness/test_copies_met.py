"""Copies sent together to test the claim must be shown to have met (issue 23's honesty rule:
a precondition that did not happen is unknown, never a pass).  late-retry's expired burst on
wsgi_latin1 under CI: every copy but one was answered with the replay, the flaw (an expired
key taken for an absent one, outside any transaction) never met a second copy, and P1 passed."""

from __future__ import annotations

from harness import COPIES_MET
from tests.harness.stories import JSON, Story, replayed


def _intend(story: Story, key: str, *, slowed: bool = True) -> None:
    story.history.intend(COPIES_MET, key, ["P1"], tenant="t1", group="expired-burst",
                         label="expired-burst", slowed=slowed)


def _burst(story: Story, key: str, *answers: int, slowed: bool = True) -> None:
    """An intent to make copies of ``key`` meet, then one copy charging and the others
    answered ``answers`` (a replay for 201, in progress for 409)."""
    _intend(story, key, slowed=slowed)
    story.attempt(key, 201, label="expired-burst", resource=f"ch-{key}", headers=JSON)
    for status in answers:
        story.attempt(key, status, label="expired-burst", resource=f"ch-{key}"
                      if status == 201 else None, headers=replayed() if status == 201 else {})
    story.effects(key, 1, ids=[f"ch-{key}"])


def test_copies_that_never_showed_they_met_leave_the_claim_unknown() -> None:
    """The key's earlier window (before it expired) holds a charge of its own: two charges for
    the key say nothing about the copies."""
    story = Story()
    story.attempt("k1", 201, label="original", resource="ch-old", headers=JSON)
    story.clock(90_000)
    _burst(story, "k1", 201, 201, 201)
    story.effects("k1", 2, ids=["ch-old", "ch-k1"])
    result = story.check("P1")
    assert result.results["P1"].verdict == "unknown"
    assert "never showed that two ran at the same time" in (result.results["P1"].reason or "")


def test_copies_the_harness_could_not_slow_leave_a_note_not_an_unknown() -> None:
    """A target with no slow hook and a handler over in a few milliseconds (the reference
    server as ``init`` drafts it) cannot be made to meet: the claim is untested, and said so."""
    story = Story()
    _burst(story, "k1", 201, 201, 201, slowed=False)
    result = story.check("P1")
    assert result.results["P1"].verdict == "pass"
    assert any("no slow hook" in n.message and not n.undecided for n in result.notes)


def test_one_burst_that_met_is_enough_for_the_group() -> None:
    story = Story()
    _burst(story, "k1", 201, 201, 201)
    _burst(story, "k2", 409, 201, 201)
    assert story.check("P1").results["P1"].verdict == "pass"


def test_copies_that_charged_apart_met_and_fail() -> None:
    story = Story()
    _intend(story, "k1")
    story.attempt("k1", 201, label="expired-burst", resource="ch_1", headers=JSON)
    story.attempt("k1", 201, label="expired-burst", resource="ch_2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    result = story.check("P1")
    assert result.results["P1"].verdict == "fail" and not any(
        n.undecided for n in result.notes)

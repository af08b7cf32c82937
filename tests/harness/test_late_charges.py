"""A key answered 2xx with nothing charged is looked at again before the count is judged, by
run and explore alike (ScenarioContext.collect_effects): a service that answers before it
commits (ack-before-commit) charges a few milliseconds late, and at seed 1 the bench once
reported such a charge as lost, in a story no replay reproduced.  tests/corpus/
test_late_effects.py drives the race itself, with effects read from a lagging replica."""

from __future__ import annotations

from harness.evidence._oracle import answered_without_a_charge, last_counts
from tests.harness.stories import JSON, Story


def late(story: Story) -> list[tuple[str | None, str | None]]:
    events = story.history.events()
    return answered_without_a_charge(events, last_counts(events))


def test_a_count_of_nothing_after_a_2xx_answer_is_looked_at_again() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", headers=JSON)
    story.effects("k1", 0, ids=[])
    assert late(story) == [("t1", "k1")]


def test_a_count_taken_before_the_answer_or_that_found_the_charge_is_not() -> None:
    story = Story()
    story.effects("k1", 0, ids=[])
    story.attempt("k1", 201, resource="ch_1", headers=JSON)  # counted before it answered
    story.attempt("k2", 201, resource="ch_2", headers=JSON)
    story.effects("k2", 1, ids=["ch_2"])
    story.attempt("k3", 409)  # no 2xx: nothing to look for
    story.effects("k3", 0, ids=[])
    assert late(story) == []

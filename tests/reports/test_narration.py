"""The narrator on hand-built histories: what a trainer's audience reads, step by step."""

from __future__ import annotations

import io

from rich.console import Console

from harness import FAULTS
from harness._history import NEMESIS, Event
from harness._outcomes import Step
from harness._target import ReplayMarker
from harness.demo import Narrator
from tests.harness.stories import JSON, Story, replayed


def narrate(events: tuple[Event, ...]) -> str:
    output = io.StringIO()
    narrator = Narrator(Console(file=output, width=200, color_system=None),
                        replay_marker=ReplayMarker("Idempotent-Replayed"))
    for event in events:
        narrator.handle(Step("timeout-after-commit", event))
    return output.getvalue()


def lost_response(story: Story) -> None:
    story.history.record("info", "fault", NEMESIS, value=FAULTS["response-timeout"].describe())
    story.attempt("k1", None)
    story.history.record("info", "heal", NEMESIS, value=FAULTS["response-timeout"].describe())


def test_the_seed_story_is_told_in_order() -> None:
    story = Story()
    lost_response(story)
    story.attempt("k1", 201, attempt=2, resource="ch_2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])

    lines = narrate(story.history.events()).splitlines()

    assert "response is held back until the client gives up" in lines[0]
    assert lines[1].startswith("→ c1 sends POST /charges with key K1, attempt 1")
    assert "the response was lost on its way back" in lines[2]
    assert "heals response-timeout" in lines[3]
    assert "c2 retries POST /charges with key K1, attempt 2" in lines[4]
    assert "c2 gets 201 for key K1: not a replay" in lines[5]
    assert "the ledger holds 2 charges for key K1 (ch_1, ch_2): 2 charges for one operation" in (
        lines[6])


def test_a_replay_is_told_as_a_replay() -> None:
    story = Story()
    lost_response(story)
    story.attempt("k1", 201, attempt=2, resource="ch_1", headers=replayed())
    assert "the stored response, replayed (ch_1)" in narrate(story.history.events())


def test_a_refusal_that_keeps_coming_back_is_folded_into_a_count() -> None:
    story = Story()
    history = story.history
    for attempt in range(2, 9):
        sent = history.invoke("request", "c1", key="k1", tenant="t1", attempt=attempt,
                              method="POST", path="/charges", fingerprint="fp-a")
        if attempt < 8:
            history.complete(sent, "fail", status=409, body_digest="d-409",
                             body='{"error": "in_progress"}')
        else:
            history.complete(sent, "ok", status=201, resource="ch_1", body_digest="d1")

    text = narrate(story.history.events())

    assert text.count("409 Conflict [in_progress]") == 1
    assert "5 more retries, each answered the same" in text
    assert "attempt 8" in text and "committed charge ch_1" in text

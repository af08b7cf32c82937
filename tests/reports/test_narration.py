"""The narrator on hand-built histories: what a trainer's audience reads, step by step, in the
order the server did things."""

from __future__ import annotations

import io

from rich.console import Console

from harness import FAULTS, load_target
from harness._history import NEMESIS, Event
from harness._outcomes import Step
from harness._target import ReplayMarker
from harness.demo import Narrator
from tests.harness.stories import JSON, Story, replayed


def narrate(events: tuple[Event, ...], *, reference: bool = False) -> str:
    """What the narrator prints for ``events``; with ``reference`` it knows the reference
    server's target file (its lease of 30 s, retention of 24 h and hooks)."""
    output = io.StringIO()
    console = Console(file=output, width=200, color_system=None)
    narrator = (Narrator(console, target=load_target("reference")) if reference
                else Narrator(console, replay_marker=ReplayMarker("Idempotent-Replayed")))
    for event in events:
        narrator.handle(Step("timeout-after-commit", event))
    return output.getvalue()


def told(text: str, *phrases: str) -> list[int]:
    """The line each phrase is first told on (-1: never)."""
    lines = text.splitlines()
    return [next((n for n, line in enumerate(lines) if phrase in line), -1) for phrase in phrases]


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
    assert "attempt 8" in text and "answered with a new charge, ch_1" in text


def copies(story: Story, count: int, *, headers: dict[str, str] | None = None) -> list[Event]:
    return [story.history.invoke("request", f"c{n}", key="k1", tenant="t1", attempt=1,
                                 method="POST", path="/charges", fingerprint="fp-a",
                                 body='{"amount": 1}', headers=headers) for n in range(count)]


def test_a_replay_is_never_told_before_the_charge_it_replays() -> None:
    """c2's replay of ch_2 reached its client before c1's answer naming ch_2: the server made
    ch_2 first, so the narrator tells c1's charge first."""
    story = Story()
    c0, c1, c2 = copies(story, 3)
    story.answer(c0, 201, resource="ch_1", headers=JSON)
    story.answer(c2, 201, resource="ch_2", headers=replayed())
    story.answer(c1, 201, resource="ch_2", headers=JSON)

    text = narrate(story.history.events())

    charge, replay = told(text,
                          "c1 gets 201 for key K1: the server answered with ANOTHER charge, ch_2",
                          "c2 gets 201 for key K1: the stored response, replayed (ch_2)")
    assert -1 < charge < replay, text


def test_a_replay_whose_charge_is_never_named_is_still_told() -> None:
    story = Story()
    c0, c1 = copies(story, 2)
    story.answer(c1, 201, resource="ch_1", headers=replayed())
    story.lose(c0)
    story.effects("k1", 1, ids=["ch_1"])
    text = narrate(story.history.events())
    assert "the stored response, replayed (ch_1)" in text and "no answer for key K1" in text


def test_a_409_while_the_original_runs_says_so() -> None:
    story = Story()
    original, retry = copies(story, 2, headers=None)
    story.answer(retry, 409)
    story.answer(original, 201, resource="ch_1", headers=JSON)
    assert "409 Conflict for key K1: another request with this key (c0) is running" in narrate(
        story.history.events())


def test_a_409_whose_cause_answered_first_is_still_told_as_caused_by_it() -> None:
    """c1 ran while c0 waited, so c0's 409 came from c1's claim, though c1's answer reached
    its client first."""
    story = Story()
    first, second = copies(story, 2, headers=None)
    story.answer(second, 201, resource="ch_1", headers=JSON)
    story.answer(first, 409)
    assert "409 Conflict for key K1: another request with this key (c1) is running" in narrate(
        story.history.events())


def test_a_dead_servers_claim_is_not_called_still_running() -> None:
    story = Story()
    crashing = story.history.invoke(
        "request", "c0", key="k1", tenant="t1", attempt=1, label="crash:after-claim",
        method="POST", path="/charges", fingerprint="fp-a", body='{"amount": 1}',
        headers={"X-Test-Fault": "crash-after-claim"})
    story.lose(crashing, "disconnected")  # the client notices before the harness does
    story.crash()
    story.attempt("k1", 409, attempt=2)
    story.clock(31)
    story.attempt("k1", 409, attempt=3)

    text = narrate(story.history.events(), reference=True)

    assert "with this key is running" not in text
    sent, died, lost = told(text, "set to kill the server after-claim", "the server process dies",
                            "no answer for key K1 (disconnected): the server died with the "
                            "request in it")
    assert -1 < sent < died < lost, text
    assert "409 Conflict for key K1: the key is still marked in progress, but the request that " \
           "claimed it died with the server: nothing is running it" in text
    assert "jumps 31s forward: past the promised lease of 30s" in text
    assert "and its lease of 30s has run out" in text


def test_a_key_past_its_retention_is_told_as_a_new_operation_not_a_second_charge() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", headers=JSON)
    story.clock(24 * 3600 + 60)
    story.attempt("k1", 201, attempt=2, resource="ch_2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])

    text = narrate(story.history.events(), reference=True)

    assert "24h 1m after the key's first use: past the promised retention of 24h" in text
    assert "the key had expired, so the server ran the request as a new operation" in text
    assert "ANOTHER" not in text and "for one operation" not in text
    assert "one for each retention window" in text


def test_a_charge_a_client_was_told_of_and_the_ledger_lacks_is_named() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", headers=JSON)
    story.effects("k1", 0, ids=[])
    text = narrate(story.history.events(), reference=True)
    assert "the ledger holds 0 charges for key K1: ch_1, which a client was told, is not there" \
        in text


def test_a_slowed_handler_is_told_where_it_is_sent() -> None:
    story = Story()
    (slow,) = copies(story, 1, headers={"X-Test-Delay-Ms": "1200"})
    story.answer(slow, 201, resource="ch_1", headers=JSON)
    assert "attempt 1, its handler slowed by 1200 ms" in narrate(story.history.events(),
                                                                reference=True)


def test_a_reused_key_is_told_as_another_request_under_the_same_key() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", headers=JSON)
    story.attempt("k1", 201, attempt=2, fingerprint="fp-b", label="reuse:body", resource="ch_1",
                  headers=replayed())
    lines = narrate(story.history.events()).splitlines()
    assert "a different request under the same key" not in lines[0]
    assert "attempt 2 (reuse:body), a different request under the same key" in lines[2]

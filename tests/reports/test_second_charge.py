"""How a second charge is told: P1's explanation from the evidence (copies at once, a retry that
ran again, a late original past its lease), and the sequence diagram drawing each charge where
it happened, before any answer that names it."""

from __future__ import annotations

from harness._history import Event
from harness._target import ReplayMarker
from harness.diagrams._model import Diagram, Row
from harness.diagrams._storyboard import finding_diagram
from tests.harness.stories import JSON, Story, replayed

MARKER = ReplayMarker("Idempotent-Replayed")
SLOW = {"X-Test-Delay-Ms": "1200"}


def slowed_original(story: Story) -> Event:
    return story.history.invoke(
        "request", "c0", key="k1", tenant="t1", attempt=1, label="original", method="POST",
        path="/charges", fingerprint="fp-a", body='{"amount": 1}', key_header='"k1"',
        headers=SLOW)


def zombie(story: Story) -> None:
    """The zombie-original scenario against a lease without fencing."""
    original = slowed_original(story)
    story.clock(31)  # past the promised lease of 30 s
    story.attempt("k1", 201, attempt=2, label="takeover", resource="ch_2", headers=JSON)
    story.answer(original, 201, resource="ch_1", headers=JSON)
    story.attempt("k1", 201, attempt=3, label="retry", resource="ch_2", headers=replayed())
    story.effects("k1", 2, ids=["ch_1", "ch_2"])


def p1_message(story: Story) -> str:
    (finding,) = [f for f in story.check("P1").findings if f.property == "P1"]
    return finding.message


def diagram(story: Story) -> Diagram:
    (finding,) = [f for f in story.check("P1").findings if f.property == "P1"]
    drawn = finding_diagram(finding, story.history.events(), replay_marker=MARKER)
    assert drawn is not None
    return drawn


def text(row: Row) -> str:
    return " ".join(label.text for label in row.labels)


def test_p1_explains_a_late_original_past_its_lease_as_such() -> None:
    story = Story()
    zombie(story)
    message = p1_message(story)
    assert "still running past its lease of 30s" in message
    assert "the late original committed its own charge" in message
    assert "ran at the same time" not in message and "A retry was executed again" not in message


def test_p1_says_the_server_died_in_a_request_it_then_ran_again() -> None:
    story = Story()
    story.attempt("k1", None)
    story.crash()
    story.attempt("k1", 201, attempt=2, resource="ch_2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    assert "run again after the server died in it" in p1_message(story)


def test_the_late_originals_charge_is_drawn_at_its_own_late_answer() -> None:
    story = Story()
    zombie(story)
    rows = diagram(story).rows
    kinds = [(r.kind, text(r)) for r in rows]
    second = next(n for n, r in enumerate(rows) if "second charge: ch_1" in text(r))
    assert rows[second].highlight
    assert kinds[second + 1] == ("answer", "c0 · 201 · ch_1")  # the original's, after takeover's
    takeover = next(n for n, (_, t) in enumerate(kinds) if t == "c2 · 201 · ch_2")
    assert takeover < second


def test_a_charge_is_drawn_before_a_replay_of_it_that_reached_its_client_first() -> None:
    """Copies at once: c2's answer naming ch_2 reached its client after c3's replay of ch_2.
    The server committed ch_2 before it could replay it, so that is where it is drawn."""
    story = Story()
    copies = [story.history.invoke("request", f"c{n}", key="k1", tenant="t1", attempt=1,
                                   method="POST", path="/charges", fingerprint="fp-a",
                                   body='{"amount": 1}', key_header='"k1"') for n in (1, 2, 3)]
    story.answer(copies[0], 201, resource="ch_1", headers=JSON)
    story.answer(copies[2], 201, resource="ch_2", headers=replayed())  # the replay arrives first
    story.answer(copies[1], 201, resource="ch_2", headers=JSON)  # the commit it replays
    story.effects("k1", 2, ids=["ch_1", "ch_2"])

    assert "ran at the same time were each executed" in p1_message(story)
    rows = [(r.kind, text(r)) for r in diagram(story).rows]
    commit = rows.index(("commit", "second charge: ch_2"))
    replay = next(n for n, (_, t) in enumerate(rows) if "ch_2 · replay" in t)
    assert commit < replay, rows
    assert sum(1 for kind, _ in rows if kind == "commit") == 2

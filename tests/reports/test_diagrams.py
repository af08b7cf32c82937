"""Sequence diagrams laid out from hand-built histories judged by the real checker: the rows a
person reads, the commits read off the history, and the highlight on what the finding is about."""

from __future__ import annotations

from harness import FAULTS, Finding
from harness._history import NEMESIS
from harness._target import ReplayMarker
from harness.diagrams._model import Diagram, Row
from harness.diagrams._storyboard import finding_diagram, sequence_diagram
from tests.harness.stories import JSON, Story, replayed

REPLAY = "Idempotent-Replayed"
MARKER = ReplayMarker(REPLAY)


def fault(story: Story, name: str) -> None:
    story.history.record("info", "fault", NEMESIS, value=FAULTS[name].describe())


def heal(story: Story, name: str) -> None:
    story.history.record("info", "heal", NEMESIS, value=FAULTS[name].describe())


def lost_then_retried(story: Story, *, second: str, headers: dict[str, str]) -> None:
    fault(story, "response-timeout")
    story.attempt("k1", None)
    heal(story, "response-timeout")
    story.attempt("k1", 201, attempt=2, resource=second, digest=f"d-{second}", headers=headers)


def only(story: Story, prop: str) -> Finding:
    (finding,) = [f for f in story.check(prop).findings if f.property == prop]
    return finding


def diagram_of(story: Story, finding: Finding) -> Diagram:
    diagram = finding_diagram(finding, story.history.events(), replay_marker=MARKER)
    assert diagram is not None
    return diagram


def labels(row: Row) -> str:
    return " ".join(label.text for label in row.labels) + " ".join(b.text for b in row.boxes)


def test_a_lost_response_and_a_second_charge_read_like_the_seed_story() -> None:
    story = Story()
    lost_then_retried(story, second="ch_2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])

    diagram = diagram_of(story, only(story, "P1"))

    assert [r.kind for r in diagram.rows] == ["fault", "request", "commit", "lost", "heal",
                                              "request", "commit", "answer", "ledger"]
    first, second = (r for r in diagram.rows if r.kind == "commit")
    assert "commit ch_1 (answer lost)" in labels(first)
    assert first.lines[0].dashed and not first.highlight
    assert "second charge: ch_2" in labels(second) and second.highlight
    lost = next(r for r in diagram.rows if r.kind == "lost")
    assert lost.crosses and "timeout" in labels(lost) and "lost" in labels(lost)
    assert next(r for r in diagram.rows if r.kind == "ledger").highlight
    assert [b.kind for b in diagram.bands] == ["fault"]
    assert diagram.faults == ("response-timeout",)


def test_the_same_story_on_a_correct_server_is_a_replay_and_nothing_is_highlighted() -> None:
    story = Story()
    lost_then_retried(story, second="ch_1", headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])
    events = story.history.events()

    diagram = sequence_diagram(events, [e.index for e in events], replay_marker=MARKER)

    assert diagram is not None and diagram.highlighted == 0
    (commit,) = (r for r in diagram.rows if r.kind == "commit")
    assert "commit ch_1 (answer lost)" in labels(commit)
    answer = next(r for r in diagram.rows if r.kind == "answer")
    assert "201 · ch_1 · replay" in labels(answer)


def test_a_reused_key_highlights_the_answer_to_the_reuse() -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1", headers=JSON)
    story.attempt("k1", 201, attempt=2, fingerprint="fp-b", label="reuse:body", resource="ch_1",
                  digest="d1", headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])

    diagram = diagram_of(story, only(story, "P4"))

    highlighted = [r for r in diagram.rows if r.highlight]
    assert [r.kind for r in highlighted] == ["answer"]
    assert highlighted[0].index == 3  # events: invoke, answer, the reuse, its answer (3)
    assert sum(1 for r in diagram.rows if r.kind == "commit") == 1


def test_a_cross_tenant_replay_highlights_the_answer_that_is_not_the_tenants_own() -> None:
    story = Story()
    story.attempt("k1", 201, tenant="alice-x", resource="ch_a", digest="da", headers=JSON)
    story.attempt("k1", 201, tenant="bob-x", fingerprint="fp-b", resource="ch_a", digest="da",
                  headers=replayed())
    story.effects("k1", 1, tenant="alice-x", ids=["ch_a"])
    story.effects("k1", 0, tenant="bob-x", ids=[])

    finding = next(f for f in story.check("P8").findings if f.key == "bob-x/k1")
    diagram = diagram_of(story, finding)

    answer, ledger = (r for r in diagram.rows if r.highlight)
    assert answer.kind == "answer" and "bob" in labels(answer)
    assert ledger.kind == "ledger" and "bob: 0 charges" in labels(ledger)
    assert any("alice" in labels(r) for r in diagram.rows if r.kind == "request")


def test_a_request_held_at_toxiproxy_never_reaches_the_server() -> None:
    story = Story()
    fault(story, "request-timeout")
    story.attempt("k1", None)
    heal(story, "request-timeout")
    story.attempt("k1", 201, attempt=2, resource="ch_1", digest="d1", headers=JSON)
    story.effects("k1", 1, ids=["ch_1"])
    events = story.history.events()

    diagram = sequence_diagram(events, [e.index for e in events], replay_marker=MARKER)

    assert diagram is not None
    held = next(r for r in diagram.rows if r.kind == "request")
    assert "held at Toxiproxy" in labels(held) and held.crosses
    assert held.lines[0].x2 < next(lane.x for lane in diagram.lanes if lane.name == "server")
    (commit,) = (r for r in diagram.rows if r.kind == "commit")
    assert "commit ch_1" in labels(commit) and not commit.lines[0].dashed


def test_a_crash_draws_the_server_down_until_the_restart() -> None:
    story = Story()
    story.attempt("k1", None)
    story.crash()
    story.attempt("k1", 201, attempt=2, resource="ch_2", digest="d2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    events = story.history.events()

    diagram = diagram_of(story, only(story, "P9"))

    assert [r.kind for r in diagram.rows][:5] == ["request", "commit", "lost", "crash",
                                                  "restart"]
    assert [b.kind for b in diagram.bands] == ["down"]
    assert sequence_diagram(events, [], replay_marker=MARKER) is None

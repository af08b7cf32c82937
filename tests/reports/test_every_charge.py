"""Every charge of a key is named and drawn: a P1 message lists each charge the ledger holds and
which of them no answer named, and its diagram draws one commit per charge the ledger counts,
even when the lost answers cannot be paired one to one with the charges nobody named."""

from __future__ import annotations

from harness._target import ReplayMarker
from harness.diagrams._storyboard import finding_diagram
from tests.harness.stories import JSON, Story, replayed


def _split_commit() -> Story:
    """The crash after the work: the first charge is never named by an answer; the retries
    after the restart charge again and are replayed that second charge."""
    story = Story()
    story.attempt("k1", None)
    story.crash()
    for attempt in (2, 3, 4):
        story.attempt("k1", 201, attempt=attempt, resource="ch_2",
                      headers=JSON if attempt == 2 else replayed())
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    return story


def test_a_p1_message_names_every_charge_and_the_one_no_answer_named() -> None:
    (finding,) = _split_commit().check("P1").findings
    assert "2 charges for key t1/k1 (ch_1, ch_2; no answer named ch_1)" in finding.message


def test_each_charge_the_ledger_counts_is_drawn_when_lost_answers_outnumber_them() -> None:
    """Two attempts lost their answers, one charge nobody named: which of the two made it is
    not known, but the charge is drawn, beside the ledger that counts it."""
    story = Story()
    story.attempt("k1", None)
    story.attempt("k1", None, attempt=2)
    story.attempt("k1", 201, attempt=3, resource="ch_2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    (finding,) = story.check("P1").findings
    diagram = finding_diagram(finding, story.history.events(),
                              replay_marker=ReplayMarker("Idempotent-Replayed"))
    assert diagram is not None
    commits = [r for r in diagram.rows if r.kind == "commit"]
    texts = [" ".join(label.text for label in r.labels) for r in commits]
    assert len(commits) == 2, texts
    assert texts[1].startswith("second charge: ch_1") and "no answer named it" in texts[1]
    assert commits[1].highlight
    kinds = [r.kind for r in diagram.rows]
    assert kinds.index("ledger") == kinds.index("commit", kinds.index("commit") + 1) + 1

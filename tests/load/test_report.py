"""What a load run shows a person: the stall in its diagrams (issue 14, item 14).

Requests a request stall holds never reach the server while it acts: the diagram stops them at
Toxiproxy, and draws them going on together at the heal, where their charges happen.
"""

from __future__ import annotations

from harness._history import NEMESIS
from harness.diagrams._model import Row
from harness.diagrams._storyboard import finding_diagram
from harness.http.load._schedule import STALL, network_fault
from tests.harness.stories import Story


def labels(row: Row) -> str:
    return " ".join(label.text for label in row.labels) + " ".join(b.text for b in row.boxes)


def test_held_requests_wait_at_toxiproxy_and_reach_the_server_together_at_the_heal() -> None:
    story = Story()
    stall = network_fault(STALL).describe()
    story.history.record("info", "fault", NEMESIS, value=stall)
    story.attempt("k1", None)
    story.attempt("k1", None, attempt=2)
    story.history.record("info", "heal", NEMESIS, value=stall)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])
    (finding,) = [f for f in story.check("P1").findings if f.property == "P1"]

    diagram = finding_diagram(finding, story.history.events())

    assert diagram is not None
    kinds = [r.kind for r in diagram.rows]
    assert kinds == ["fault", "request", "lost", "request", "lost", "heal", "release", "commit",
                     "commit", "ledger"]
    proxy, server = (next(lane.x for lane in diagram.lanes if lane.name == name)
                     for name in ("toxiproxy", "server"))
    for held in (r for r in diagram.rows if r.kind == "request"):
        assert "held at Toxiproxy" in labels(held)
        assert held.lines[0].x2 == proxy and not held.crosses
    for lost in (r for r in diagram.rows if r.kind == "lost"):
        assert lost.lines[0].x1 == proxy, "the client gave up while Toxiproxy held the request"
    release = next(r for r in diagram.rows if r.kind == "release")
    assert (release.lines[0].x1, release.lines[0].x2) == (proxy, server)
    assert "2 held requests reach the server at once" in labels(release)
    first, second = (r for r in diagram.rows if r.kind == "commit")
    assert "commit ch_1" in labels(first) and "second charge: ch_2" in labels(second)
    assert second.highlight and second.top > release.top

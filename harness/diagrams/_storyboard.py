"""The diagrams of one scenario's history, drawn by the front end whose history it is.

The front end that owns the history (``harness._front.front_of_history``: a queue consumer's
publishes) lays it out; every layout returns the same ``Diagram`` (``_model.py``), which the
reports only render.  Asking here keeps the reports from importing a front end's internals and
the front ends from importing the reports.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from harness._front import Layout, front_of_history
from harness._history import Event
from harness._target import ReplayMarker
from harness.diagrams._model import Diagram
from harness.judging._findings import Finding

__all__ = ["Storyboard", "finding_diagram", "sequence_diagram"]


class Storyboard:
    """One scenario's history, read once for every diagram drawn from it."""

    def __init__(self, events: Sequence[Event], *,
                 replay_marker: ReplayMarker | None = None) -> None:
        self._by_index = {e.index: e for e in events}
        self._layout: Layout = front_of_history(events).layout(events,
                                                               replay_marker=replay_marker)

    def draw(self, cited: Iterable[int], *, finding: Finding | None = None) -> Diagram | None:
        """The diagram of the ``cited`` events; what ``finding`` is about is highlighted, and
        without a finding nothing is.  None when none of ``cited`` is in the history."""
        chosen = [self._by_index[i] for i in sorted(set(cited)) if i in self._by_index]
        if not chosen:
            return None
        return self._layout(chosen, finding)


def finding_diagram(finding: Finding, events: Sequence[Event], *,
                    replay_marker: ReplayMarker | None = None) -> Diagram | None:
    """The diagram of ``finding`` over its scenario's ``events``; None when it cites none."""
    return Storyboard(events, replay_marker=replay_marker).draw(finding.events, finding=finding)


def sequence_diagram(events: Sequence[Event], cited: Iterable[int], *,
                     replay_marker: ReplayMarker | None = None,
                     finding: Finding | None = None) -> Diagram | None:
    """One diagram of a scenario's ``events``: ``Storyboard.draw`` without keeping the board."""
    return Storyboard(events, replay_marker=replay_marker).draw(cited, finding=finding)

"""The sequence diagram as data: lanes, rows, boxes and bands, whatever front end drew it.

A front end lays a finding's events out as a ``Diagram`` (an HTTP target's in
``harness/http/_diagram.py``, a queue consumer's in ``harness/consumer/_diagram.py``); the
report only renders one (``sequence.svg.j2``, or ``reports/_narrow.py`` for a phone).  Neither
side imports the other: both know only this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from harness._history import Event

__all__ = ["BOTTOM", "CHAR", "DUPLICATES", "ROW", "TOP", "WIDE", "WIDTH", "Band", "Box",
           "Diagram", "Label", "Lane", "LaneName", "Layout", "Line", "Row", "fit", "tooltip"]

#: A queue consumer's diagram has the producer, the broker and the consumer instead of the
#: client and the server (harness/consumer/_diagram.py).
LaneName = Literal["client", "toxiproxy", "server", "store", "producer", "broker", "consumer"]

WIDTH = 960.0
TOP = 52.0
ROW = 30.0
BOTTOM = 16.0
CHAR = 6.6  # the width of one 12 px character, near enough to size a box around a label

#: Properties whose finding is a duplicate: every commit after a key's first is highlighted.
DUPLICATES = frozenset({"P1", "P2", "P6", "P9"})


@dataclass(frozen=True, slots=True)
class Lane:
    name: LaneName
    title: str
    x: float


@dataclass(frozen=True, slots=True)
class Line:
    x1: float
    x2: float
    dashed: bool = False
    arrow: bool = True


@dataclass(frozen=True, slots=True)
class Label:
    x: float
    text: str


@dataclass(frozen=True, slots=True)
class Box:
    x: float
    width: float
    text: str
    bolt: bool = False


@dataclass(frozen=True, slots=True)
class Row:
    """One event (or one inferred commit), at ``top``; lines and crosses sit at ``y``."""

    kind: str
    top: float
    time: str
    tooltip: str
    index: int | None = None  # the history event it draws; None for an inferred commit
    highlight: bool = False
    lines: tuple[Line, ...] = ()
    crosses: tuple[float, ...] = ()
    labels: tuple[Label, ...] = ()
    boxes: tuple[Box, ...] = ()

    @property
    def y(self) -> float:
        return self.top + ROW * 0.66


@dataclass(frozen=True, slots=True)
class Band:
    """A span on one lane: a fault acting on Toxiproxy, or the server down after a crash."""

    kind: Literal["fault", "down"]
    x: float
    top: float
    bottom: float
    title: str


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a row's parts sit, from its top: wide, the time in a column of its own and each
    label along its arrow; narrow (``_narrow.py``, for a phone), the time and the label on a
    line of their own above the arrow."""

    narrow: bool = False
    row_height: float = ROW
    line_dy: float = ROW * 0.66
    label_dy: float = ROW * 0.66 - 6
    box_dy: float = 5.0
    head_half: float = 52.0
    time_x: float | None = 12.0


WIDE = Layout()


@dataclass(frozen=True)
class Diagram:
    title: str
    width: float
    height: float
    lanes: tuple[Lane, ...]
    rows: tuple[Row, ...]
    bands: tuple[Band, ...] = ()
    faults: tuple[str, ...] = ()
    layout: Layout = WIDE

    @property
    def highlighted(self) -> int:
        return sum(1 for row in self.rows if row.highlight)


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, with an ellipsis where it was cut."""
    return text if len(text) <= width else text[: width - 1] + "…"


def tooltip(event: Event) -> str:
    """Everything the event recorded, for the row's hover text."""
    lines = [f"event {event.index}: {event.f} {event.type} by {event.process} "
             f"at {event.time:.3f}s"]
    for name in ("tenant", "key", "attempt", "label", "method", "path", "status", "resource",
                 "error"):
        value = getattr(event, name)
        if value is not None:
            lines.append(f"{name}: {value}")
    if event.headers:
        lines.append("headers: " + ", ".join(f"{k}: {v}" for k, v in event.headers.items()))
    if event.body:
        lines.append("body: " + fit(event.body, 300))
    if event.value:
        lines.append("value: " + fit(json.dumps(dict(event.value), sort_keys=True), 300))
    return "\n".join(lines)

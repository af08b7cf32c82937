"""A sequence diagram for a phone: the same rows, laid out to fit a narrow screen.

The wide diagram (960 px, a label along each arrow, the time in a column of its own) cannot fit
400 px without shrinking its text below reading size; scrolled in its box, it shows only the
client's lane.  The narrow one keeps every lane on screen: the lanes closer together, the time
and the label on a line of their own above the arrow (cut to the width; the row's tooltip has
it all), boxes on their lane and inside the picture.  The page shows one or the other by the
screen's width.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from itertools import pairwise

from harness.diagrams._model import (
    BOTTOM,
    CHAR,
    TOP,
    Band,
    Box,
    Diagram,
    Label,
    Lane,
    Layout,
    Line,
    Row,
)

__all__ = ["NARROW", "narrowed"]

#: The picture's width: a 400 px screen less the page's, the section's and the card's margins.
WIDTH = 296.0
NARROW = Layout(narrow=True, row_height=44.0, line_dy=31.0, label_dy=15.0, box_dy=20.0,
                head_half=33.0, time_x=None)


def narrowed(diagram: Diagram) -> Diagram:
    """``diagram`` laid out ``NARROW``: every lane, row and band where the narrow picture
    puts it."""
    wide = [lane.x for lane in diagram.lanes]
    margin = NARROW.head_half + 2
    step = (WIDTH - 2 * margin) / max(1, len(wide) - 1)
    narrow = [margin + step * position for position in range(len(wide))]

    def at(x: float) -> float:
        return _mapped(x, wide, narrow)

    def y(value: float) -> float:
        return TOP + (value - TOP) * NARROW.row_height / diagram.layout.row_height

    rows = tuple(_row(row, TOP + NARROW.row_height * number, at)
                 for number, row in enumerate(diagram.rows))
    return replace(
        diagram, width=WIDTH, height=TOP + NARROW.row_height * len(rows) + BOTTOM,
        lanes=tuple(Lane(lane.name, lane.title, x) for lane, x in zip(diagram.lanes, narrow,
                                                                        strict=True)),
        rows=rows,
        bands=tuple(Band(b.kind, at(b.x), y(b.top), y(b.bottom), b.title)
                    for b in diagram.bands),
        layout=NARROW)


def _mapped(x: float, wide: Sequence[float], narrow: Sequence[float]) -> float:
    """``x`` moved from the wide lanes to the narrow ones, in proportion between the two lanes
    around it (outside them, kept inside the picture)."""
    if x <= wide[0]:
        return max(4.0, narrow[0] - (wide[0] - x) * 0.2)
    for (left, right), (to_left, to_right) in zip(pairwise(wide), pairwise(narrow),
                                                   strict=True):
        if x <= right:
            return to_left + (x - left) * (to_right - to_left) / (right - left)
    return min(WIDTH - 4, narrow[-1] + (x - wide[-1]) * 0.2)


def _row(row: Row, top: float, at: Callable[[float], float]) -> Row:
    said = " · ".join(label.text for label in row.labels)
    text = _fit(f"{row.time}  {said}".strip(), int((WIDTH - 8) / CHAR))
    return replace(row, top=top, time="",
                   lines=tuple(Line(at(line.x1), at(line.x2), line.dashed, line.arrow)
                               for line in row.lines),
                   crosses=tuple(at(x) for x in row.crosses),
                   labels=(Label(4.0, text),),
                   boxes=tuple(_box(box, at) for box in row.boxes))


def _box(box: Box, at: Callable[[float], float]) -> Box:
    """The box centred on its lane's new place, no wider than the picture."""
    room = int((WIDTH - 8 - (34 if box.bolt else 20)) / CHAR)
    text = _fit(box.text, room)
    width = len(text) * CHAR + (34 if box.bolt else 20)
    x = min(max(at(box.x + box.width / 2) - width / 2, 4.0), WIDTH - width - 4)
    return Box(x, width, text, box.bolt)


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"

"""What a probe's steps share: an observation beside the promise it bears on, and two ways of
reading an answer.  Apart from ``_probe`` so that a step of its own module can use them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from harness._history import Event

__all__ = ["Kind", "Observation", "answered_2xx", "describe_answer"]

Kind = Literal["confirmed", "learned", "deviation", "bug", "unknown"]


@dataclass(frozen=True, slots=True)
class Observation:
    """What a probe saw about one promise (``field`` None: about the section as a whole).
    ``section`` is the file's table, dotted when nested (``hooks.clock``)."""

    section: str
    field: str | None
    kind: Kind
    note: str
    #: What to write, for ``learned`` and ``deviation``; the file's value stays otherwise.
    value: Any = None

    @property
    def writes(self) -> bool:
        """Does it change the file's value?  (A confirmed one is written only where the file
        leaves the promise to its default.)"""
        return self.kind in ("learned", "deviation") and self.value is not None


def answered_2xx(event: Event | None) -> bool:
    return event is not None and event.status is not None and 200 <= event.status < 300


def describe_answer(event: Event | None) -> str:
    if event is None:
        return "no answer"
    if event.status is None:
        return f"no answer ({event.error})"
    return str(event.status)

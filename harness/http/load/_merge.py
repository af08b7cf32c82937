"""One history from many: the Locust nodes' and the nemesis's, on one clock.

Each Locust process recorded its own history; they arrive with wall-clock times (the one clock
all processes, even on several machines, share).  Merged, times count from the start of the
load, events are ordered by time, indices are renumbered, and each source's operation numbers are
kept apart, so an attempt's completion still finds its invocation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from harness._errors import ServiceError
from harness._history import Event, event_from_json

__all__ = ["merge_histories", "read_wall_events", "shift"]


def read_wall_events(path: Path, *, origin: float) -> list[Event]:
    """A node's events (JSON lines, wall-clock times), with times counted from ``origin``."""
    events = []
    try:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            data = json.loads(line)
            events.append(event_from_json({**data, "time": float(data["time"]) - origin,
                                           "index": number}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ServiceError(f"cannot read the history a Locust node wrote to {path}: {exc}") from exc
    return events


def shift(events: Iterable[Event], seconds: float) -> list[Event]:
    """The events with ``seconds`` added to their times."""
    return [replace(event, time=event.time + seconds) for event in events]


def merge_histories(sources: Sequence[Sequence[Event]]) -> list[Event]:
    """Events of histories that share a time origin, as one history ordered by time."""
    tagged = [(event.time, position, event.index, event)
              for position, source in enumerate(sources) for event in source]
    tagged.sort(key=lambda item: item[:3])
    ops: dict[tuple[int, int], int] = {}
    merged = []
    for index, (_, position, _, event) in enumerate(tagged):
        op = ops.setdefault((position, event.op), len(ops))
        merged.append(replace(event, index=index, op=op))
    return merged

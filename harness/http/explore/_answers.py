"""An answer in a few words for a story's step: ``201 ch_1a2b (replay)``, ``409 in_progress``.

Or ``no answer (timeout)``."""

from __future__ import annotations

import json

from harness._history import Event
from harness._target import Promises

__all__ = ["answer_text"]


def _error_code(body: str | None) -> str | None:
    """The ``error`` word of a JSON error body (``in_progress``), when there is one."""
    if not body or not body.startswith("{"):
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    code = data.get("error") if isinstance(data, dict) else None
    return code if isinstance(code, str) else None


def answer_text(event: Event, promises: Promises) -> str:
    """``201 ch_1a2b (replay)``, ``409 in_progress`` or ``no answer (timeout)``; a replay is
    only what the promised header marks as one (``Idempotent-Replayed: false`` is not)."""
    if event.status is None:
        return f"no answer ({event.error})"
    words = [str(event.status)]
    code = _error_code(event.body)
    if code:
        words.append(code)
    if event.resource:
        words.append(event.resource)
    if promises.marks_replay(event.headers):
        words.append("(replay)")
    return " ".join(words)

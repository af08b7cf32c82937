"""What every front end's reproduction scripts share: where a report directory keeps them, and
their comment lines.

A finding's script is written by its front end (an HTTP service's replays the finding's story
through the harness, ``harness/http/reproduction/``; a queue consumer's plays its scenario
again, ``harness/consumer/_reproduce.py``); the runner names it in the finding's reproduction
line and the report directory writes it at ``script_path``.
"""

from __future__ import annotations

import textwrap

__all__ = ["comment_lines", "script_path"]


def script_path(scenario: str, number: int) -> str:
    """Where, inside the report directory, the script of a scenario's ``number``-th key with
    findings is."""
    return f"reproduce/{scenario}-{number}.sh"


def comment_lines(text: str, width: int = 96) -> list[str]:
    """``text`` as bash comment lines of at most ``width`` characters of text each."""
    wrapped = textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)
    return [f"# {line}" for line in wrapped or [""]]

"""Durations on the command line: ``30``, ``30s``, ``1.5s``, ``250ms``, ``5m``, ``24h``, ``2d``.

Leases, retention and intervals are all durations, and a typo in one of them silently changes
what the server promises; so a value that is not one of these forms is an error that shows the
forms, never a guess.
"""

from __future__ import annotations

import re

import click

__all__ = ["Duration", "parse_duration"]

_UNITS = {"": 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*(ms|s|m|h|d)?")
FORMS = "30, 30s, 1.5s, 250ms, 5m, 24h or 2d"


def parse_duration(text: str) -> float:
    """Seconds in ``text``; a bare number means seconds.  Raises ``ValueError`` otherwise."""
    match = _PATTERN.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration; write {FORMS}")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or ""]
    if seconds <= 0:
        raise ValueError(f"{text!r} must be longer than zero")
    return seconds


class Duration(click.ParamType[float]):
    """A click parameter taking a duration and giving seconds as a float."""

    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)

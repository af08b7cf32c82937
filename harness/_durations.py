"""Durations as people write them in target files and flags: ``30``, ``30s``, ``5m``, ``24h``."""

from __future__ import annotations

import re

__all__ = ["format_duration", "parse_duration"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: str | float | int) -> float:
    """Seconds from a number (seconds) or a number with one unit: ms, s, m, h, d."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string such as '30s', '5m', '24h'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    match = _PATTERN.match(value)
    if not match:
        raise ValueError(
            f"{value!r} is not a duration; write a number of seconds or a number with a unit: "
            "'1.5s', '30s', '5m', '24h', '2d', '250ms'"
        )
    number, unit = match.groups()
    return float(number) * _UNITS[unit or "s"]


def format_duration(seconds: float) -> str:
    """A short spelling: 86400 -> '24h', 259200 -> '3d', 90 -> '1.5m', 0.25 -> '250ms'."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0), ("s", 1.0)):
        if seconds >= size and not (unit == "d" and seconds < 2 * size):
            amount = seconds / size
            return f"{amount:.0f}{unit}" if amount == int(amount) else f"{amount:.4g}{unit}"
    return f"{seconds * 1000:.4g}ms"

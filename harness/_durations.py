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
    """How a person says it: 0.25 -> '250ms', 4.2 -> '4.2s', 75 -> '1m 15s', 86400 -> '24h',
    90060 -> '25h 1m', 259200 -> '3d'.  At most two units; whole seconds past a minute."""
    if seconds < 1:
        return f"{seconds * 1000:.3g}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    units = [("d", 86400), ("h", 3600), ("m", 60), ("s", 1)]
    if seconds < 2 * 86400:
        units = units[1:]  # "36h" reads better than "1d 12h"
    rest = round(seconds)
    parts: list[str] = []
    for unit, size in units:
        amount, rest = divmod(rest, size)
        if amount and len(parts) < 2:
            parts.append(f"{amount}{unit}")
        elif parts:
            break
    return " ".join(parts)

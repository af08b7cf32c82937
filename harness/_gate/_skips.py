"""Skips the gate's items report where a reader looks: at the target file, not at this plugin."""

from __future__ import annotations

from typing import NoReturn

import pytest

__all__ = ["skip_at_item"]


def skip_at_item(reason: str) -> NoReturn:
    """Skip, reported at the item's location (its target file) rather than at the line of the
    plugin that raised it, which a user can do nothing with."""
    raise pytest.skip.Exception(reason, _use_item_location=True)

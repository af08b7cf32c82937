"""What a test does when something it needs is missing from the machine: under ``CI=true`` (the
``ci`` profile requires services) the run fails, elsewhere the test skips and says why."""

from __future__ import annotations

from typing import NoReturn

import pytest

from harness._profiles import get_profile

__all__ = ["missing"]


def missing(problem: str, *, kind: str = "service") -> NoReturn:
    """Fail under CI=true, skip elsewhere; ``problem`` says what is missing and how to get it."""
    if get_profile().require_services:
        pytest.fail(f"{problem}\n(CI=true: a missing {kind} is a failure, not a skip)",
                    pytrace=False)
    pytest.skip(problem)

"""A drain waits while the work still moves: a loaded machine runs a retry policy's attempts
slowly, and a drain the clock cut short read as a message that "keeps coming back" (a false P10
on the correct faststream consumer, explored at load 8: 2 of 3 failing jobs dead-lettered, the
third on its way, after 15 s)."""

from __future__ import annotations

import time
from collections.abc import Callable

from harness.consumer._context import DRAIN_PATIENCE, until_still


def _until(done: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_work_that_keeps_moving_is_waited_for_past_the_timeout() -> None:
    started = time.monotonic()
    # one message dead-lettered every 0.4 s, the last at 1.2 s; the timeout is 0.5 s
    dead = lambda: min(3, int((time.monotonic() - started) / 0.4))  # noqa: E731
    assert until_still(_until, lambda: dead() == 3, dead, 0.5)
    assert 1.1 < time.monotonic() - started < 2.0


def test_work_that_stopped_moving_is_given_up_after_the_timeout() -> None:
    started = time.monotonic()
    assert not until_still(_until, lambda: False, lambda: 0, 0.5)
    assert 0.5 <= time.monotonic() - started < 1.5


def test_even_moving_work_is_given_up_at_the_patience_limit() -> None:
    started = time.monotonic()
    assert not until_still(_until, lambda: False, time.monotonic, 0.3)
    assert DRAIN_PATIENCE * 0.3 <= time.monotonic() - started < DRAIN_PATIENCE * 0.3 + 1.2

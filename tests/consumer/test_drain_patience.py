"""A drain waits while the work still moves: a loaded machine runs a retry policy's attempts
slowly, and a drain the clock cut short read as a message that "keeps coming back" (a false P10
on the correct faststream consumer, explored at load 8: 2 of 3 failing jobs dead-lettered, the
third on its way, after 15 s).  On a clock of the test's own: each look moves it on."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.consumer._context import DRAIN_PATIENCE, until_still

LOOK = 0.01  # how far the test's clock moves for each look


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def until(self, done: Callable[[], bool], timeout: float) -> bool:
        """``ConsumerContext.until`` on this clock: a look, then time moves on."""
        deadline = self.now + timeout
        while not done():
            if self.now > deadline:
                return False
            self.now += LOOK
        return True


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


def test_work_that_keeps_moving_is_waited_for_past_the_timeout(clock: _Clock) -> None:
    # one message dead-lettered every 0.4 s, the last at 1.2 s; the timeout is 0.5 s
    dead = lambda: min(3, int(clock.now / 0.4))  # noqa: E731
    assert until_still(clock.until, lambda: dead() == 3, dead, 0.5, clock=clock.monotonic)
    assert 1.1 < clock.now < 2.0


def test_work_that_stopped_moving_is_given_up_after_the_timeout(clock: _Clock) -> None:
    assert not until_still(clock.until, lambda: False, lambda: 0, 0.5, clock=clock.monotonic)
    assert 0.5 <= clock.now < 1.5


def test_even_moving_work_is_given_up_at_the_patience_limit(clock: _Clock) -> None:
    assert not until_still(clock.until, lambda: False, clock.monotonic, 0.3,
                           clock=clock.monotonic)
    assert DRAIN_PATIENCE * 0.3 <= clock.now < DRAIN_PATIENCE * 0.3 + 1.2

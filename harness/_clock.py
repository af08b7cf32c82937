"""The target's clock as the nemesis moves it: one interface, two ways of moving it.

A target that serves a clock hook moves its own clock when asked (``HookClock``); a target the
harness starts under libfaketime has it moved from outside (``harness._faketime``).  Scenarios
and the explorer only ever call ``advance``; the history records ``via`` beside each jump, so a
report says which way the clock was moved.  A move from outside can fail unseen (a statically
linked program ignores ``LD_PRELOAD``), so ``confirm_jump`` asks the target what time it is
before and after one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import httpx

from harness._target import ClockHook

__all__ = ["HookCall", "HookClock", "TargetClock", "confirm_jump", "target_time"]

#: How far a confirmed jump may land from where it was aimed: the ``Date`` header has whole
#: seconds, and the two readings are requests on a shared machine.
JUMP_TOLERANCE = 5.0
#: How long to keep asking after a jump: some servers cache their ``Date`` header for a second.
SEEN_WITHIN = 3.0


class TargetClock(Protocol):
    """What the nemesis needs of a target's clock."""

    #: How the clock is moved, as each jump in the history says: ``hook`` or ``libfaketime``.
    via: str

    def advance(self, seconds: float) -> None: ...


HookCall = Callable[[str, str, Any, Mapping[str, Any]], Any]


class HookClock:
    """The target's own clock hook (``[hooks.clock]``), called with ``{seconds}`` filled in."""

    via = "hook"

    def __init__(self, hook: ClockHook, call: HookCall) -> None:
        self._hook = hook
        self._call = call

    def advance(self, seconds: float) -> None:
        whole = int(seconds) if float(seconds).is_integer() else seconds
        self._call(self._hook.method, self._hook.path, self._hook.body, {"seconds": whole})


class ClockUnreadable(Exception):
    """The target's answer does not say what time it is there."""


def target_time(http: httpx.Client, url: str, *, from_body: bool) -> float:
    """The target's current time in Unix seconds: the body of a time endpoint (``from_body``:
    Unix seconds, or an ISO 8601 or HTTP date), else the answer's ``Date`` header."""
    try:
        response = http.get(url)
    except httpx.HTTPError as exc:
        raise ClockUnreadable(f"GET {url} failed ({exc})") from exc
    if from_body:
        text = response.text.strip().strip('"')
        try:
            return float(text)
        except ValueError:
            pass
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
        try:
            return parsedate_to_datetime(text).timestamp()
        except (TypeError, ValueError):
            raise ClockUnreadable(f"GET {url} answered {text[:80]!r}, which is neither Unix "
                                  "seconds nor an ISO 8601 or HTTP date") from None
    header = response.headers.get("date")
    if header is None:
        raise ClockUnreadable(f"the answer to GET {url} has no Date header")
    try:
        return parsedate_to_datetime(header).timestamp()
    except (TypeError, ValueError):
        raise ClockUnreadable(f"the answer to GET {url} has a Date header that is not an HTTP "
                              f"date: {header!r}") from None


def confirm_jump(clock: TargetClock, seconds: float, read: Callable[[], float]) -> str | None:
    """Move ``clock`` by ``seconds`` and confirm the target saw it: its time, less ours, must
    grow by about ``seconds``.  None when it did; otherwise why not, in words for a report."""
    try:
        before = read() - time.time()
        clock.advance(seconds)
        deadline = time.monotonic() + SEEN_WITHIN
        while True:
            moved = read() - time.time() - before
            if abs(moved - seconds) <= JUMP_TOLERANCE:
                return None
            if time.monotonic() >= deadline:
                return (f"the target's clock did not move: it was moved {seconds:g} s ahead "
                        f"with {clock.via}, and the target's time moved {round(moved):+d} s (a "
                        "statically linked program, such as a Go binary, ignores LD_PRELOAD)")
            time.sleep(0.2)
    except ClockUnreadable as exc:
        return (f"the harness cannot tell whether the target's clock moved: {exc}; declare a "
                "time endpoint ([clock] check = \"/time\")")

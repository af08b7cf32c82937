"""The target's clock as the nemesis moves it, and the harness's account of where it stands.

One interface, two ways of moving it.

A target that serves a clock hook moves its own clock when asked (``HookClock``); a target the
harness starts under libfaketime has it moved from outside (``harness.services._faketime``).
Scenarios and the explorer only ever call ``advance``; the history records ``via`` beside each
jump, so a report says which way the clock was moved.  A move from outside can fail unseen (a
statically linked program ignores ``LD_PRELOAD``), so ``confirm_jump`` asks the target what
time it is before and after one.

``ClockKeeper`` keeps the sum of every jump, so the harness knows the target's time at every
step, and puts it back after a restart: a test clock kept in a process's memory starts again
from real time, and a claim made on the moved clock would then look younger than it is (a
lease that never runs out).  It reads the restarted target's time where the file says how,
else trusts what the file says a restart does; otherwise the clock is unknown after a restart
that followed a jump, and the front ends say so rather than guess.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal, Protocol

import httpx

from harness._target import ClockHook

__all__ = ["CONFIRMING_JUMP", "ClockAfterRestart", "ClockKeeper", "HookCall", "HookClock",
           "TargetClock", "confirm_jump", "target_time"]

#: The jump that confirms a clock moved from outside, made once the target is up and before
#: any request: long enough to tell apart from the noise of whole-second ``Date`` headers.
CONFIRMING_JUMP = 3600.0
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


def target_time(http: httpx.Client, url: str, *, from_body: bool,
                field: str | None = None) -> float:
    """The target's current time in Unix seconds: the body of a time endpoint (``from_body``:
    Unix seconds, or an ISO 8601 or HTTP date, as text or in the JSON ``field``), else the
    answer's ``Date`` header."""
    try:
        response = http.get(url)
    except httpx.HTTPError as exc:
        raise ClockUnreadable(f"GET {url} failed ({exc})") from exc
    if from_body:
        text = response.text.strip().strip('"')
        if field is not None:
            try:
                text = str(response.json()[field]).strip()
            except (ValueError, KeyError, TypeError):
                raise ClockUnreadable(f"GET {url} answered {response.text[:80]!r}, a JSON object "
                                      f"without the field {field!r}") from None
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


RestartOutcome = Literal["kept", "restored", "ahead", "unknown"]


@dataclass(frozen=True, slots=True)
class ClockAfterRestart:
    """Where a restarted target's clock stood, and what the harness did about it.

    ``kept``: it still had every jump; ``restored``: it had gone back ``seconds`` and was moved
    forward again; ``ahead``: it was ``seconds`` ahead of the harness's account (taken into the
    account, since a clock cannot be moved back); ``unknown``: nothing tells, after jumps."""

    outcome: RestartOutcome
    seconds: float = 0.0
    reason: str = ""

    def describe(self) -> dict[str, object]:
        data: dict[str, object] = {"clock": self.outcome}
        if self.seconds:
            data["clock_seconds"] = round(self.seconds, 3)
        if self.reason:
            data["clock_reason"] = self.reason
        return data


class ClockKeeper:
    """The harness's account of one deployment's clock: every jump, kept across restarts.

    ``read`` asks the target its time (Unix seconds); ``restart_resets`` is what the target
    file says a restart does when the time cannot be read; ``survives`` is true for a clock
    moved from outside, whose offset file outlives any process.
    """

    def __init__(self, clock: TargetClock, *, read: Callable[[], float] | None = None,
                 restart_resets: bool | None = None, survives: bool = False) -> None:
        self.clock = clock
        self.moved = 0.0  # seconds the harness moved the clock, in all
        #: How far ahead of real time the clock was when the harness first read it: a clock
        #: kept in the target's store starts where an earlier run left it.
        self.origin = 0.0
        self._read = read
        self._restart_resets = restart_resets
        self._survives = survives
        self.trusted = True  # false once a restart left the clock unknown

    @property
    def knows_restarts(self) -> bool:
        """Can the harness tell the clock after any restart?"""
        return self._survives or self._read is not None or self._restart_resets is not None

    def calibrate(self) -> None:
        """Read where the target's clock stands before the harness moves it (when it can be
        read): a restart is judged against that, not against real time."""
        if self._read is not None:
            with suppress(ClockUnreadable):  # then a restart reads it against real time
                self.origin = self._read() - time.time()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.moved += seconds

    def after_restart(self) -> ClockAfterRestart:
        """Bring a restarted target's clock back to the harness's account, or say why not."""
        if self._survives or not self.moved:
            return ClockAfterRestart("kept")
        if self._read is not None:
            return self._corrected()
        if self._restart_resets is True:
            self.clock.advance(self.moved)
            return ClockAfterRestart("restored", self.moved,
                                     "the target file says a restart resets its clock")
        if self._restart_resets is False:
            return ClockAfterRestart("kept")
        self.trusted = False
        return ClockAfterRestart(
            "unknown", reason=f"the clock had been moved {self.moved:g} s and nothing says "
            "whether the restart put it back: declare [hooks.clock] read (a path answering "
            "its time) or restart_resets")

    def _corrected(self) -> ClockAfterRestart:
        assert self._read is not None
        try:
            drift = self._read() - (time.time() + self.origin + self.moved)
        except ClockUnreadable as exc:
            self.trusted = False
            return ClockAfterRestart("unknown", reason=f"its time could not be read: {exc}")
        if abs(drift) <= JUMP_TOLERANCE:
            return ClockAfterRestart("kept")
        if drift < 0:
            self.clock.advance(-drift)
            return ClockAfterRestart("restored", -drift, "its time, read after the restart, "
                                                         "had gone back")
        self.moved += drift
        return ClockAfterRestart("ahead", drift, "its time, read after the restart, was ahead")

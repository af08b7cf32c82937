"""Slowed requests running in the background while a story goes on.

A slowed request is sent on a thread of its own through the slow hook; the step that starts it
returns once the target holds its key (its count of keys in progress went up), or after half
its delay when the target cannot say, so the next steps meet a request that is still running.

``ScenarioContext.send_slowly`` does the same for one scenario, but not what a story needs: the
deployment is shared and a story may have several slowed requests at once, so "in progress" is
a count above the one before, not any key at all; the key-table hook fails while a database
fault is on; a step reads an answer without waiting for it; and a slowed request's own timeout
covers its delay (the fault timeout while a network fault is on).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from harness._errors import ServiceError
from harness._history import Event
from harness.explore._steps import StepRecord
from harness.http._client import Request
from harness.http._context import ScenarioContext
from harness.http.explore._actions import Action

__all__ = ["RUNNING", "Background"]

#: What a step says of a slowed request until it is answered.
RUNNING = "still running"
#: How long to let a slowed request reach a target that cannot say it holds the key (the
#: scenarios' pause for the same case).
UNOBSERVED_PAUSE = 0.3
#: A slowed request answered with success before this share of its delay was not held by the
#: target's slow hook for as long as it was asked to be.
HELD_SHARE = 0.9


@dataclass(frozen=True)
class _Pending:
    step: StepRecord[Action]
    seconds: float
    delay_ms: int
    thread: threading.Thread
    result: list[tuple[Event, float]]  # once answered: the answer, and seconds until it came


class Background:
    """The slowed requests of one story."""

    def __init__(self, context: ScenarioContext) -> None:
        self.context = context
        self._pending: list[_Pending] = []

    def start(self, request: Request, step: StepRecord[Action], *, delay_ms: int,
              timeout: float) -> None:
        slowed = self.context.slowed(request, delay_ms)
        before = self._in_progress()
        result: list[tuple[Event, float]] = []
        process = f"s{len(self._pending)}"

        def send() -> None:
            began = time.monotonic()
            answer = self.context.send(slowed, process=process, timeout=timeout)
            result.append((answer, time.monotonic() - began))

        thread = threading.Thread(target=send, daemon=True)
        self._pending.append(_Pending(step, timeout, delay_ms, thread, result))
        thread.start()
        if before is None:  # the target cannot say: give the request a moment to arrive
            thread.join(timeout=min(UNOBSERVED_PAUSE, delay_ms / 2000))
            return
        # Stop waiting as soon as the request is answered: a network fault or a refusal can
        # end it at once, and then the key will never show as in progress.
        deadline = time.monotonic() + delay_ms / 2000
        while (time.monotonic() < deadline and thread.is_alive()
               and (self._in_progress() or 0) <= before):
            thread.join(timeout=0.01)

    def _in_progress(self) -> int | None:
        """Keys the target holds in progress; None when it cannot say (no hook, or the hook
        fails because a fault keeps the target from its database)."""
        hook = self.context.target.hooks.store_size
        if hook is None or not hook.reports_in_progress:
            return None
        try:
            return self.context.deployment.store_size().get("in_progress", 0)
        except ServiceError:
            return None

    def answered(self) -> list[tuple[StepRecord[Action], Event]]:
        """The steps whose slowed request has been answered since they were last told."""
        return [(p.step, p.result[0][0]) for p in self._pending
                if p.result and p.step.response == RUNNING]

    def held_short(self) -> list[str]:
        """The slowed requests the target answered with success well before their delay: its
        slow hook did not hold them as long as asked (a cap of its own), so the steps that
        needed them still running did not meet them.  A refusal or a lost connection ends a
        slowed request early by right; a success means the handler was not held."""
        return [f"step {p.step.number}'s slowed request was answered {answer.status} after "
                f"{seconds:.1f} s of the {p.delay_ms / 1000:g} s it was slowed for"
                for p in self._pending for answer, seconds in p.result
                if answer.status is not None and 200 <= answer.status < 300
                and seconds < HELD_SHARE * p.delay_ms / 1000]

    def join(self) -> None:
        """Wait for every slowed request to end (each within its own timeout)."""
        for pending in self._pending:
            pending.thread.join(timeout=pending.seconds + 5)

"""Slowed requests running in the background while a story goes on.

A slowed request is sent on a thread of its own through the slow hook; the step that starts it
returns once the target holds its key (its count of keys in progress went up), or after half
its delay when the target cannot say, so the next steps meet a request that is still running.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace

from harness._client import Request
from harness._errors import ServiceError, UsageError
from harness._history import Event
from harness._scenario import ScenarioContext
from harness.explore._steps import StepRecord

__all__ = ["RUNNING", "Background"]

#: What a step says of a slowed request until it is answered.
RUNNING = "still running"
#: How long to let a slowed request reach a target that cannot say it holds the key (the
#: scenarios' pause for the same case).
UNOBSERVED_PAUSE = 0.3


@dataclass
class _Pending:
    step: StepRecord
    seconds: float
    result: list[Event] = field(default_factory=list)
    thread: threading.Thread | None = None


class Background:
    """The slowed requests of one story."""

    def __init__(self, context: ScenarioContext) -> None:
        self.context = context
        self._pending: list[_Pending] = []

    def start(self, request: Request, step: StepRecord, *, delay_ms: int,
              timeout: float) -> None:
        target = self.context.target
        hook = target.hooks.slow
        if hook is None:
            raise UsageError(f"target {target.name} has no slow hook ([hooks.slow])")
        slowed = replace(request, headers={
            **request.headers, hook.header: hook.value.replace("{ms}", str(delay_ms))})
        before = self._in_progress()
        pending = _Pending(step, timeout)
        process = f"s{len(self._pending)}"
        pending.thread = threading.Thread(
            target=lambda: pending.result.append(
                self.context.send(slowed, process=process, timeout=timeout)),
            daemon=True)
        self._pending.append(pending)
        pending.thread.start()
        if before is None:  # the target cannot say: give the request a moment to arrive
            time.sleep(min(UNOBSERVED_PAUSE, delay_ms / 2000))
            return
        deadline = time.monotonic() + delay_ms / 2000
        while time.monotonic() < deadline and (self._in_progress() or 0) <= before:
            time.sleep(0.01)

    def _in_progress(self) -> int | None:
        """Keys the target holds in progress; None when it cannot say (no hook, or the hook
        fails because a fault keeps the target from its database)."""
        hook = self.context.target.hooks.store_size
        if hook is None or not hook.in_progress:
            return None
        try:
            return self.context.deployment.store_size().get("in_progress", 0)
        except ServiceError:
            return None

    def answered(self) -> list[tuple[StepRecord, Event]]:
        """The steps whose slowed request has been answered since they were last told."""
        return [(p.step, p.result[0]) for p in self._pending
                if p.result and p.step.response == RUNNING]

    def join(self) -> None:
        """Wait for every slowed request to end (each within its own timeout)."""
        for pending in self._pending:
            if pending.thread is not None:
                pending.thread.join(timeout=pending.seconds + 5)

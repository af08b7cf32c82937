"""Ctrl-C and SIGTERM as one exception, so every command stops the same way: its ``finally``
blocks stop the children, a run writes what it finished as *incomplete*, and the process exits
as the shell reports a signal (128 + its number), with no traceback."""

from __future__ import annotations

import signal
import threading
from types import FrameType

__all__ = ["Interrupted", "interrupt_on_signals"]


class Interrupted(KeyboardInterrupt):
    """The user (SIGINT) or a supervisor (SIGTERM) asked the harness to stop.

    A ``KeyboardInterrupt`` so that libraries that treat Ctrl-C specially (Hypothesis stops at
    once instead of reporting a flaky test) treat SIGTERM the same way.
    """

    def __init__(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by {self.signal_name}")


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def interrupt_on_signals() -> None:
    """Raise ``Interrupted`` in the main thread on SIGINT and SIGTERM."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise)

"""Ctrl-C and SIGTERM as one exception, so every command stops the same way.

Its ``finally`` blocks stop the children, a run writes what it finished as *incomplete*, and the
process exits as the shell reports a signal (128 + its number), with no traceback."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["SIGNAL_CHECK_SECONDS", "Interrupted", "StopRequest", "each_as_done",
           "interrupt_on_signals", "interruption_handled", "main_until_interrupted",
           "raise_if_interrupted", "signals_deferred"]

#: How often a thread waiting for worker threads wakes.  The kernel may hand Ctrl-C to any
#: thread; Python then only notes it for the main thread, which acts on it when it next runs:
#: blocked in an untimed wait, that is when the last worker ends.
SIGNAL_CHECK_SECONDS = 0.1


class Interrupted(KeyboardInterrupt):
    """The user (SIGINT) or a supervisor (SIGTERM) asked the harness to stop.

    A ``KeyboardInterrupt`` so that libraries that treat Ctrl-C specially (Hypothesis stops at
    once instead of reporting a flaky test) treat SIGTERM the same way.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        super().__init__(f"interrupted by {self.signal_name}")


class StopRequest:
    """Ctrl-C for work in a thread that signals never reach.

    Python raises a signal's exception in the main thread only.  A run in a worker thread (a
    matrix row) learns of it here instead: the main thread hands over the signal it caught
    (``stop``), and the run ``check``s between its steps and raises the same ``Interrupted``
    there, so it stops as it would in the main thread: its children stopped, what it finished
    reported as incomplete.
    """

    def __init__(self) -> None:
        self._signum: int | None = None

    def stop(self, interrupt: Interrupted) -> None:
        self._signum = interrupt.signum

    def clear(self) -> None:
        self._signum = None

    def check(self) -> None:
        """Raise ``Interrupted`` once ``stop`` has been called."""
        if self._signum is not None:
            raise Interrupted(self._signum)

    @property
    def pending(self) -> Interrupted | None:
        """The interruption asked for, if any."""
        return None if self._signum is None else Interrupted(self._signum)


def each_as_done(pending: Iterable[Future[Any]],
                 record: Callable[[Future[Any]], None] | None = None, *,
                 stop: StopRequest | None = None) -> None:
    """Wait for ``pending``, handing each future to ``record`` as it ends, in steps of
    ``SIGNAL_CHECK_SECONDS``: so that Ctrl-C reaches a main thread promptly, and so that a
    worker thread, which signals never reach, checks its ``stop`` as often."""
    waiting = set(pending)
    while waiting:
        done, waiting = wait(waiting, timeout=SIGNAL_CHECK_SECONDS, return_when=FIRST_COMPLETED)
        if record is not None:
            for future in done:
                record(future)
        if stop is not None:
            stop.check()


#: The signal ``_raise`` raised, kept: Python runs a handler wherever the main thread is, and
#: an exception raised inside a garbage collector's callback (Hypothesis installs one) is
#: printed as "ignored" and lost, so the work would go on as if no one had asked it to stop.
_RAISED = StopRequest()


def _raise(signum: int, frame: FrameType | None) -> None:
    _RAISED.stop(Interrupted(signum))
    raise Interrupted(signum)


def _unraisable(unraisable: Any) -> None:
    """Where the signal's ``Interrupted`` was lost (a garbage collector's callback), say
    nothing: ``raise_if_interrupted`` raises it again, and the command stops without a
    traceback.  Anything else is printed as Python prints it."""
    if isinstance(unraisable.exc_value, Interrupted):
        return
    sys.__unraisablehook__(unraisable)


def raise_if_interrupted() -> None:
    """Raise the ``Interrupted`` a signal raised before, in case it was lost where it landed:
    long work calls it between its steps (the explorer, as each example and step begins)."""
    _RAISED.check()


def interruption_handled() -> None:
    """The work a signal stopped has caught its ``Interrupted`` and reported: forget it, so
    that later work in the same process (a second exploration in a test session, a gate) is
    not stopped again by a signal that was already obeyed."""
    _RAISED.clear()


def interrupt_on_signals() -> None:
    """Raise ``Interrupted`` in the main thread on SIGINT and SIGTERM."""
    if threading.current_thread() is not threading.main_thread():
        return
    _RAISED.clear()  # a fresh start: nothing asked this command to stop yet
    sys.unraisablehook = _unraisable
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _raise)


def main_until_interrupted(main: Callable[[], None], name: str) -> None:
    """Run a script's ``main`` so that SIGINT and SIGTERM stop it as they stop a command: the
    run in progress reports itself incomplete, and the script exits 128 + the signal's
    number, saying so under ``name``, with no traceback."""
    interrupt_on_signals()
    try:
        main()
    except Interrupted as stop:
        print(f"\n{name} {stop}", file=sys.stderr)
        sys.exit(stop.exit_code)


@contextmanager
def signals_deferred() -> Iterator[StopRequest]:
    """Hold SIGINT and SIGTERM back while the block runs (the last report files are being
    written: a signal now must not leave them half-done); the returned ``StopRequest`` has
    ``check`` raise the ``Interrupted`` that arrived meanwhile, if one did.  Outside the main
    thread, where signals never arrive, it changes nothing."""
    held = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield held
        return

    def hold(signum: int, frame: FrameType | None) -> None:
        held.stop(Interrupted(signum))

    previous = {signum: signal.signal(signum, hold) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield held
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

"""A signal's ``Interrupted`` lost where it landed is raised again: Python runs the handler
wherever the main thread is, and an exception raised inside a garbage collector's callback
(Hypothesis installs one) is printed as "ignored" and dropped; an exploration stopped so went
on drawing, and the command never ended (tests/explore/test_honest.py, now and then)."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time

import pytest

from harness._interrupts import Interrupted, interrupt_on_signals, raise_if_interrupted


def test_a_signal_swallowed_where_it_landed_is_raised_at_the_next_check(
        capsys: pytest.CaptureFixture[str]) -> None:
    previous = signal.getsignal(signal.SIGINT)
    hook = sys.unraisablehook
    interrupt_on_signals()
    try:
        raise_if_interrupted()  # nothing asked to stop yet

        def swallow(phase: str, info: dict[str, int]) -> None:
            if phase == "start":  # the handler runs here, and gc drops what it raises
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)

        gc.callbacks.append(swallow)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(swallow)
        with pytest.raises(Interrupted) as stopped:
            raise_if_interrupted()
        assert stopped.value.signal_name == "SIGINT"
        assert "Traceback" not in capsys.readouterr().err  # nothing said where it was lost
        interrupt_on_signals()  # a new command starts clean
        raise_if_interrupted()
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = hook

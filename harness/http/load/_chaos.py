"""Acting out a chaos schedule against a deployment while the load runs.

The runner is a thread of the load command (the Locust processes only send and record).  Every
act goes through the ``Nemesis``, so it lands in the run's history as ``fault``/``heal`` or
``crash``/``restart`` events at the moment it happened, and the checker sees exactly what the
clients met.  When the load's time is up, or on ``stop``, whatever still acts is healed and
every dead process restarted, so the last retries and the oracle meet a whole target.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from harness._errors import HarnessError
from harness.http._nemesis import Nemesis
from harness.http.load._schedule import CRASH, Window, network_fault

__all__ = ["ChaosRunner"]


@dataclass(frozen=True, slots=True)
class _Step:
    at: float
    begin: bool
    window: Window


class ChaosRunner:
    """Runs ``schedule`` on a thread from ``start`` until ``duration`` seconds have passed."""

    def __init__(self, nemesis: Nemesis, schedule: list[Window], *, duration: float) -> None:
        self.nemesis = nemesis
        self.duration = duration
        self.errors: list[str] = []
        steps = [_Step(w.start, True, w) for w in schedule]
        steps += [_Step(w.end, False, w) for w in schedule]
        # At one instant, end what is ending before beginning what begins.
        self._steps = sorted(steps, key=lambda s: (s.at, s.begin))
        self._active: list[Window] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos", daemon=True)
        self._started = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """End the chaos now (healing what acts) and wait for the thread."""
        self._stopping.set()
        self.join()

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join()

    def _wait_until(self, at: float) -> bool:
        """Wait until ``at`` seconds into the run; False if told to stop first."""
        remaining = at - (time.monotonic() - self._started)
        return not self._stopping.wait(max(0.0, remaining))

    def _run(self) -> None:
        try:
            for step in self._steps:
                if not self._wait_until(step.at):
                    return
                if step.begin:
                    self._act(step.window, begin=True)
                    self._active.append(step.window)
                elif step.window in self._active:
                    self._active.remove(step.window)
                    self._act(step.window, begin=False)
            self._wait_until(self.duration)
        finally:
            for window in reversed(self._active):
                self._act(window, begin=False)
            self._active.clear()
            self._revive()

    def _act(self, window: Window, *, begin: bool) -> None:
        """Begin or end one window; a failure is remembered, never raised into the load."""
        try:
            if window.fault == CRASH:
                assert window.instance is not None
                if begin:
                    self.nemesis.kill(window.instance)
                else:
                    self.nemesis.restart(window.instance)
            elif begin:
                self.nemesis.inject(network_fault(window.fault), instance=window.instance)
            else:
                self.nemesis.heal(network_fault(window.fault), instance=window.instance)
        except HarnessError as exc:
            action = "begin" if begin else "end"
            self.errors.append(f"could not {action} {window.fault} at {window.start:.1f}s: {exc}")

    def _revive(self) -> None:
        """Restart any instance that is down, whoever killed it."""
        deployment = self.nemesis.deployment
        for instance in deployment.instances:
            if not deployment.is_running(instance.number):
                try:
                    self.nemesis.restart(instance.number)
                except HarnessError as exc:
                    self.errors.append(f"could not restart instance {instance.number}: {exc}")

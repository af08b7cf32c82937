"""Chaos profiles: when which fault acts during a load run, decided up front as plain data.

A schedule is a list of windows (Jepsen's generators are values too): a network fault on one
instance's proxy or on all of them, or a crash of one server process that ends with its restart.
It is a pure function of the profile, the run's length, the instances and the seed, so the same
seed replays the same chaos, and a test may hand the runner a schedule of its own.

The network faults are the ones a retry storm is made of:

- ``response-timeout``, ``response-reset``: the charge happened, the answer is lost; the retry
  must be answered from the stored response.
- ``response-latency``: a latency spike on the way back.
- ``request-stall``: requests are held on the way in, longer than the client waits; the clients
  time out and retry into the stall, and when it clears every held copy reaches the server at
  once.  Toxiproxy's latency toxic forwards what it holds when it is removed, which is what makes
  this the concurrent same-key arrival an atomic claim has to win.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from harness._errors import UsageError
from harness._nemesis import Fault
from harness.http._nemesis import fault_named
from harness.services._toxiproxy import Toxic

__all__ = [
    "CHAOS_PROFILES",
    "CRASH",
    "NETWORK_FAULTS",
    "Window",
    "chaos_schedule",
    "network_fault",
]

CHAOS_PROFILES: dict[str, str] = {
    "none": "no faults: the load alone",
    "flaky-network": "response timeouts, resets, latency spikes and request stalls on the proxies",
    "crashy-server": "server processes killed (SIGKILL) and restarted",
    "storm": "flaky-network and crashy-server at once",
}
CRASH = "crash"
STALL = "request-stall"
_SPIKE = "response-latency"
NETWORK_FAULTS = ("response-timeout", "response-reset", _SPIKE, STALL)
#: Longer than any window: a stalled request moves only when the stall is healed.
_STALL_HOLD_MS = 600_000
#: Runs shorter than this get proportionally shorter gaps (the faults keep their length).
_FULL_PACE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Window:
    """``fault`` acts from ``start`` to ``end`` (seconds from the start of the load) on
    ``instance``, or on every instance when it is None.  A ``crash`` window ends with the
    restart."""

    start: float
    end: float
    fault: str
    instance: int | None = None


def network_fault(name: str) -> Fault:
    """The fault behind a network window: the nemesis catalog's, or the load's own stall."""
    if name == STALL:
        return Fault(STALL, "requests are held until the stall ends, then delivered at once",
                     Toxic("latency", "upstream", {"latency": _STALL_HOLD_MS, "jitter": 0}))
    return fault_named(name)


def chaos_schedule(profile: str, *, duration: float, instances: int, seed: int,
                   request_timeout: float, can_restart: bool) -> list[Window]:
    """The windows of ``profile`` for a run of ``duration`` seconds, ordered by start."""
    if profile not in CHAOS_PROFILES:
        raise UsageError(f"unknown chaos profile {profile!r}; choose one of "
                         f"{', '.join(CHAOS_PROFILES)}")
    if profile == "crashy-server" and not can_restart:
        raise UsageError("--chaos crashy-server kills and restarts server processes: the target "
                         "needs a [start] table with restartable = true")
    pace = min(1.0, duration / _FULL_PACE_SECONDS)
    windows: list[Window] = []
    if profile in ("flaky-network", "storm"):
        windows += _network_track(random.Random(f"{seed}:network"), duration, instances, pace,
                                  request_timeout)
    if profile in ("crashy-server", "storm") and can_restart:
        windows += _crash_track(random.Random(f"{seed}:crash"), duration, instances, pace)
    return sorted(windows, key=lambda w: (w.start, w.fault))


def _network_track(rng: random.Random, duration: float, instances: int, pace: float,
                   request_timeout: float) -> list[Window]:
    """One network fault at a time, each kind once (in a seeded order) before any repeats.

    A stall lasts 2.5 to 4 client timeouts, so a client retries into it at least twice and the
    held copies of one key land together; the other faults last 1 to 2.5 timeouts.  The first
    fault is one that costs attempts their answers (not the latency spike, which a client
    waits out), so a run with room for a single fault still sees retries.
    """
    windows: list[Window] = []
    pending = rng.sample(NETWORK_FAULTS, len(NETWORK_FAULTS))
    if pending[-1] == _SPIKE:
        pending.insert(0, pending.pop())
    start = rng.uniform(1.0, 3.0) * pace
    while True:
        if not pending:
            pending = rng.sample(NETWORK_FAULTS, len(NETWORK_FAULTS))
        fault = pending.pop()
        low, high = (2.5, 4.0) if fault == STALL else (1.0, 2.5)
        length = rng.uniform(low, high) * request_timeout
        if start + length > duration:
            return windows
        on_one = fault != STALL and instances > 1 and rng.random() < 0.5
        windows.append(Window(start, start + length, fault,
                              rng.randrange(instances) if on_one else None))
        start += length + rng.uniform(2.0, 5.0) * pace


def _crash_track(rng: random.Random, duration: float, instances: int,
                 pace: float) -> list[Window]:
    """A server process killed every 6 to 12 seconds (at full pace), down for up to 1.5 s."""
    windows: list[Window] = []
    start = rng.uniform(2.0, 5.0) * pace
    while True:
        down = rng.uniform(0.5, 1.5)
        if start + down > duration - 1.0:
            return windows
        windows.append(Window(start, start + down, CRASH, rng.randrange(instances)))
        start += down + rng.uniform(6.0, 12.0) * pace

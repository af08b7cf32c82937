"""Where the CPU went during a load run: Locust, the target's processes, Toxiproxy, the rest.

On one machine the harness and the target share the cores, so a throughput figure means little
without the split: if a Locust process (gevent: one core at most) ran near a full core, the
harness, not the target, set the pace.  The Locust processes report their own CPU time; the
target's processes and Toxiproxy are read with psutil, the target's every half second, because
the chaos kills them and a dead process's CPU time can no longer be read (so up to half a second
per crash goes uncounted).  "other" is the machine's busy time left over: PostgreSQL, the kernel,
this process, and anything else running on the machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

__all__ = ["CpuMeter", "CpuSplit"]

#: A Locust process busier than this fraction of one core was the limit, not the target.
SATURATED = 0.9
SAMPLE_INTERVAL = 0.5


@dataclass(frozen=True, slots=True)
class CpuSplit:
    wall_seconds: float
    cores: int
    locust_seconds: float
    locust_busiest: float
    servers_seconds: float
    toxiproxy_seconds: float
    machine_seconds: float

    @property
    def other_seconds(self) -> float:
        known = self.locust_seconds + self.servers_seconds + self.toxiproxy_seconds
        return max(0.0, self.machine_seconds - known)

    @property
    def harness_bound(self) -> bool:
        """Did a Locust process run out of CPU (so the harness limited the load)?"""
        return self.locust_busiest >= SATURATED

    def to_json(self) -> dict[str, float | int | bool]:
        return {
            "wall_seconds": round(self.wall_seconds, 3),
            "cores": self.cores,
            "locust_seconds": round(self.locust_seconds, 3),
            "locust_busiest_core_share": round(self.locust_busiest, 3),
            "servers_seconds": round(self.servers_seconds, 3),
            "toxiproxy_seconds": round(self.toxiproxy_seconds, 3),
            "other_seconds": round(self.other_seconds, 3),
            "machine_seconds": round(self.machine_seconds, 3),
            "harness_bound": self.harness_bound,
        }


def process_seconds(pid: int) -> float | None:
    """User plus system CPU seconds of ``pid`` so far; None if it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return float(times.user + times.system)


def _machine_seconds() -> float:
    times = psutil.cpu_times()
    return float(times.user + times.nice + times.system + getattr(times, "irq", 0.0)
                 + getattr(times, "softirq", 0.0))


class CpuMeter:
    """Measures from ``start`` to ``finish``; ``servers`` names the target's pids at any moment
    (a restarted process has a new one)."""

    def __init__(self, *, servers: Callable[[], Iterable[int]], toxiproxy: int | None) -> None:
        self._servers = servers
        self._toxiproxy = toxiproxy
        self._baseline: dict[int, float] = {}
        self._latest: dict[int, float] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="cpu-meter",
                                        daemon=True)
        self._wall = 0.0
        self._machine = 0.0
        self._toxiproxy_before = 0.0

    def start(self) -> None:
        self._wall = time.monotonic()
        self._machine = _machine_seconds()
        if self._toxiproxy is not None:
            self._toxiproxy_before = process_seconds(self._toxiproxy) or 0.0
        self._sample(baseline=True)
        self._thread.start()

    def _sample(self, *, baseline: bool = False) -> None:
        for pid in self._servers():
            seconds = process_seconds(pid)
            if seconds is None:
                continue
            with self._lock:
                if baseline:
                    self._baseline[pid] = seconds
                self._latest[pid] = seconds

    def _sample_until_stopped(self) -> None:
        while not self._stopping.wait(SAMPLE_INTERVAL):
            self._sample()

    def close(self) -> None:
        """Stop sampling (``finish`` does this too)."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def finish(self, *, locust: Iterable[float]) -> CpuSplit:
        """``locust``: each Locust process's own CPU seconds over the run."""
        self.close()
        self._sample()
        wall = time.monotonic() - self._wall
        with self._lock:
            servers = sum(latest - self._baseline.get(pid, 0.0)
                          for pid, latest in self._latest.items())
        toxiproxy = 0.0
        if self._toxiproxy is not None:
            now = process_seconds(self._toxiproxy)
            toxiproxy = 0.0 if now is None else now - self._toxiproxy_before
        locust_list = list(locust)
        return CpuSplit(
            wall_seconds=wall,
            cores=psutil.cpu_count() or 1,
            locust_seconds=sum(locust_list),
            locust_busiest=max(locust_list, default=0.0) / wall if wall > 0 else 0.0,
            servers_seconds=servers,
            toxiproxy_seconds=toxiproxy,
            machine_seconds=_machine_seconds() - self._machine,
        )

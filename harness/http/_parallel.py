"""Scenarios at once, each through proxies of its own, or on an instance of its own.

Independent scenarios share the target, each through proxies of its own; scenarios that need
the whole target run on an instance of their own, or alone.

Most scenarios only send requests with keys and tenants of their own (each scenario's random
source, and so its key prefix, depends only on the seed and its name), so several can share one
running target as long as a network fault one of them injects meets only its own connections:
each runs in a ``Lane``, a view of the deployment with its own Toxiproxy proxy in front of
every instance.  A scenario that moves the clock, kills or restarts the process, faults the
store, reads or cleans the whole key table, or starts more processes changes the target for
everyone (``WHOLE_TARGET``): it runs on an instance of its own (``OwnInstances``) when the
caller can give it a store of its own (``own_target``), otherwise alone, after the others.
A lane refuses such operations (``WholeTargetNeeded``), so a scenario that does not declare
what it uses (``Scenario.needs``, ``Scenario.uses``) gets an unknown verdict that says so,
never a verdict bent by its neighbours.

Outcomes are reported in the order of the plan, whatever order they finish in.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path

from harness._clock import ClockAfterRestart
from harness._errors import HarnessError, ServiceError
from harness._interrupts import StopRequest, each_as_done
from harness._outcomes import ScenarioOutcome
from harness._scenario import Scenario
from harness._target import Target
from harness.http._deployment import Deployment, Instance
from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["WHOLE_TARGET", "Lane", "OwnInstances", "WholeTargetNeeded",
           "needs_whole_target", "run_at_once", "whole_target_scenarios"]

#: Capabilities whose use changes the target for every scenario running on it.
WHOLE_TARGET = frozenset({"clock", "crash", "restart", "store-proxy", "store-size", "cleanup",
                          "instances", "keyless-total"})

#: Runs one scenario on a deployment: the runner's own ``_run_one`` with the run's settings.
RunOne = Callable[[Scenario, Deployment, random.Random], ScenarioOutcome]


def needs_whole_target(scenario: Scenario, target: Target) -> bool:
    """Does ``scenario`` change ``target`` for everyone (what it needs, and what it uses when
    the target offers it)?"""
    used = scenario.needs | (scenario.uses & target.capabilities())
    return bool(used & WHOLE_TARGET)


class WholeTargetNeeded(HarnessError):
    """A scenario running beside others tried to change the whole target."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"it tried to {what} while other scenarios shared the target; declare it in the "
            "scenario's `needs` or `uses` so that it runs on a target of its own, or run with "
            "--jobs 1")


class Lane(Deployment):
    """One scenario's view of a shared deployment: the same processes, oracle and hooks, a
    Toxiproxy proxy of its own in front of each instance, and no store proxy; whatever would
    change the target for the others is refused."""

    def __init__(self, whole: Deployment, name: str) -> None:  # a view: no Deployment start
        self.__dict__.update(whole.__dict__)
        self.store_proxy = None
        self.commit_proxy = None
        self.instances = []
        try:
            for instance in whole.instances:
                upstream = instance.proxy.upstream
                proxy = whole.toxiproxy.client.create_proxy(
                    f"idem-{whole.run_id}-{name}-{instance.number}", upstream)
                self.instances.append(
                    Instance(instance.number, instance.direct_url, proxy, instance.process))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Delete this lane's proxies; the deployment itself belongs to the run."""
        for instance in self.instances:
            with suppress(ServiceError):  # Toxiproxy is going away with the run
                instance.proxy.delete()
        self.instances = []

    def ensure_instances(self, count: int) -> None:
        if count > len(self.instances):
            raise WholeTargetNeeded(f"start {count} target processes")

    def kill(self, number: int = 0) -> None:
        raise WholeTargetNeeded("kill the target")

    def restart(self, number: int = 0) -> ClockAfterRestart:
        raise WholeTargetNeeded("restart the target")

    def wait_for_exit(self, number: int = 0, *, timeout: float = 10.0) -> bool:
        raise WholeTargetNeeded("crash the target")

    def advance_clock(self, seconds: float) -> None:
        raise WholeTargetNeeded("move the target's clock")

    def cleanup(self) -> None:
        raise WholeTargetNeeded("run the target's cleanup")


class OwnInstances:
    """Instances for the scenarios that need the whole target, each with a store of its own
    (``own_target``).  They start one at a time: starting a process is CPU work, and started
    together they would all be late, the longest scenario's (queued first) as late as the rest.
    An instance whose scenario has ended serves the next one that needs an instance, as the
    one target of a serial run serves every scenario in turn: never two scenarios at once.
    ``warm_up`` starts the first while the shared target is still starting."""

    def __init__(self, own_target: Callable[[str], Target], *, toxiproxy: ToxiproxyServer,
                 workdir: Path, allow_remote: bool) -> None:
        self._own_target = own_target
        self._toxiproxy = toxiproxy
        self._workdir = workdir
        self._allow_remote = allow_remote
        self._lock = threading.Lock()
        self._starting = threading.Lock()
        self._idle: list[Deployment] = []
        self._started: list[Deployment] = []
        self._warming: threading.Thread | None = None

    def warm_up(self) -> None:
        """Start an instance in the background now, for the first scenario that needs one."""
        def start() -> None:
            # Parked before the start lock is let go, so a scenario waiting on it finds this
            # instance instead of starting another.  A failure is left to the scenario's own
            # start, which meets it again and says so.
            with suppress(HarnessError), self._starting:
                self.give_back(self._start())

        self._warming = threading.Thread(target=start, name="own-instance", daemon=True)
        self._warming.start()

    def take(self) -> Deployment:
        """An idle instance, or one started now (after any start under way, which may end
        with an idle one)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        with self._starting:
            with self._lock:
                if self._idle:
                    return self._idle.pop()
            return self._start()

    def give_back(self, own: Deployment) -> None:
        with self._lock:
            self._idle.append(own)

    def _start(self) -> Deployment:
        with self._lock:
            number = len(self._started)
            own = Deployment(self._own_target(f"own-{number}"), toxiproxy=self._toxiproxy,
                             workdir=self._workdir / f"own-{number}",
                             allow_remote=self._allow_remote)
            self._started.append(own)
        return own.start()

    def close(self) -> None:
        """Stop every instance at once (each close waits for its processes to exit)."""
        if self._warming is not None:
            self._warming.join()
        with ThreadPoolExecutor(max_workers=max(1, len(self._started))) as closer:
            list(closer.map(Deployment.close, self._started))

    def __enter__(self) -> OwnInstances:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def whole_target_scenarios(scenarios: Sequence[Scenario], target: Target) -> list[int]:
    """Positions of the scenarios that apply to ``target`` and change it for everyone."""
    return [i for i, s in enumerate(scenarios)
            if not s.not_applicable(target) and needs_whole_target(s, target)]


def run_at_once(scenarios: Sequence[Scenario], deployment: Deployment, *, jobs: int,
                seed: int, own: OwnInstances | None, run_one: RunOne,
                started: Callable[[int], None],
                finished: Callable[[int, ScenarioOutcome], None],
                stop: StopRequest | None = None) -> None:
    """Run ``scenarios`` up to ``jobs`` at once; ``started`` and ``finished`` hear each one's
    position in the plan (under one lock, so report handlers see one event at a time).  Those
    that need the whole target run on ``own`` instances, or without them alone, after the
    others.

    Once the run is stopped (an interrupt in the calling thread, or ``stop`` for a calling
    thread that signals do not reach), ``finished`` hears nothing
    more: a scenario still running then ends against a target being torn down, and its outcome
    would pass for a verdict on a scenario that never ran to its end.
    """
    whole = whole_target_scenarios(scenarios, deployment.target)
    alone = [] if own is not None else whole
    lock = threading.Lock()
    halted = threading.Event()

    def play(position: int) -> None:
        scenario = scenarios[position]
        rng = random.Random(f"{seed}:{scenario.name}")
        with lock:
            started(position)
        if position in alone:
            outcome = run_one(scenario, deployment, rng)
        elif position in whole:
            assert own is not None
            instance = own.take()
            outcome = run_one(scenario, instance, rng)
            own.give_back(instance)
        else:
            lane = Lane(deployment, f"lane{position}")
            try:
                outcome = run_one(scenario, lane, rng)
            finally:
                lane.close()
        with lock:
            if not halted.is_set():
                finished(position, outcome)

    # The longest first (``Scenario.expected_seconds``), so that the run ends soon after its
    # longest scenario instead of with a long one begun last; among equals, those on the shared
    # target first, since they need no instance started (and instances start one at a time).
    order = sorted((i for i in range(len(scenarios)) if i not in alone),
                   key=lambda i: (-scenarios[i].expected_seconds, i in whole))
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="scenario")
    try:
        futures: list[Future[None]] = [pool.submit(play, i) for i in order]
        each_as_done(futures, stop=stop)  # timed waits, so that Ctrl-C is heard at once
        for future in futures:
            future.result()  # a harness error in one scenario's set-up ends the run
    except BaseException:
        with lock:  # no ``finished`` is half-way through once this is set
            halted.set()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    for position in alone:  # the whole target to themselves, after the others
        if stop is not None:
            stop.check()
        play(position)

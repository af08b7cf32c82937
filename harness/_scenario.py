"""What a scenario is, and the context it runs in.

A scenario is a generator in Jepsen's sense: it decides what happens when (requests, retries,
faults, clock jumps) and asserts nothing.  It talks to the target only through its context,
which records everything into the history and exposes only what the target file promises, so
every scenario runs against any target, or says why it cannot.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from harness._client import RecordingClient, Request, RetryPolicy, is_final
from harness._deployment import Deployment
from harness._errors import UsageError
from harness._history import ORACLE, Event, History
from harness._nemesis import Fault, Nemesis, fault_named
from harness._oracle import identities_sent, record_effects
from harness._target import Target, render_template

__all__ = ["CAPABILITY_HINTS", "Pending", "Scenario", "ScenarioContext"]

#: Why a capability is missing, in the words of the target file.
CAPABILITY_HINTS = {
    "clock": "a clock hook ([hooks.clock]) to advance the target's clock",
    "crash": "a crash hook ([hooks.crash]) and a restartable [start]",
    "restart": "a [start] table with restartable = true",
    "slow": "a slow-handler hook ([hooks.slow])",
    "handler-error": "a handler-error hook ([hooks.handler_error])",
    "store-size": "a key-store size hook ([hooks.store_size])",
    "cleanup": "a cleanup hook ([hooks.cleanup])",
    "tenants": "a [tenant] table saying how tenants are expressed",
    "retention": "a promised retention (promises.retention)",
    "lease": "a promised lease (promises.lease)",
    "store-proxy": "a [store_proxy] through which the target reaches its database",
}


@dataclass(frozen=True)
class Scenario:
    """One named story.  ``plan`` is its steps in words, faults included, for ``explain``."""

    name: str
    summary: str
    story: str
    properties: tuple[str, ...]
    plan: tuple[str, ...]
    run: Callable[[ScenarioContext], None]
    needs: frozenset[str] = field(default_factory=frozenset)
    applies: Callable[[Target], str | None] = field(default=lambda target: None)

    def not_applicable(self, target: Target) -> str | None:
        """Why this scenario cannot run against ``target``, or None when it can."""
        missing = sorted(self.needs - target.capabilities())
        if missing:
            wanted = "; ".join(CAPABILITY_HINTS.get(m, m) for m in missing)
            return f"target {target.name} lacks {wanted}"
        return self.applies(target)


class Pending:
    """A request running in its own thread; ``wait`` gives its completion."""

    def __init__(self, send: Callable[[], Event], *, timeout: float) -> None:
        self._result: list[Event] = []
        self._timeout = timeout
        self._thread = threading.Thread(target=lambda: self._result.append(send()))
        self._thread.start()

    def wait(self) -> Event:
        self._thread.join(timeout=self._timeout)
        if not self._result:
            raise UsageError(f"a background request did not finish within {self._timeout:.0f}s")
        return self._result[0]


class ScenarioContext:
    """Everything a scenario may do to the target, each step recorded in ``history``."""

    def __init__(self, *, scenario: Scenario, deployment: Deployment, history: History,
                 rng: random.Random, policy: RetryPolicy | None = None) -> None:
        self.scenario = scenario
        self.deployment = deployment
        self.target = deployment.target
        self.history = history
        self.rng = rng
        self.policy = policy or RetryPolicy()
        self.nemesis = Nemesis(deployment, history)
        self.client = RecordingClient(self.target, history, [i.url for i in deployment.instances])
        self._prefix = f"{deployment.run_id}-{uuid.UUID(int=rng.getrandbits(128)).hex[:6]}"
        self._counter = 0
        self._lock = threading.Lock()

    # ---- identities and bodies -------------------------------------------------------------

    def new_key(self) -> str:
        with self._lock:
            self._counter += 1
            return f"{self._prefix}-{self._counter:04d}"

    def tenant(self, name: str = "a") -> str | None:
        """A tenant unique to this run, or None when the target has no tenants."""
        return f"{name}-{self._prefix}" if self.target.tenant is not None else None

    def body(self, **values: Any) -> Any:
        """A request body from the target's template with fresh values."""
        defaults = {"amount": self.rng.randint(100, 99_999), "nonce": uuid.uuid4().hex,
                    "customer": f"cus_{self.rng.randint(1000, 9999)}"}
        return render_template(self.target.endpoint.body, {**defaults, **values})

    def request(self, key: str | None, body: Any = None, **fields: Any) -> Request:
        tenant = fields.pop("tenant", self.tenant())
        return Request(key=key, tenant=tenant, body=self.body() if body is None else body,
                       **fields)

    # ---- sending ---------------------------------------------------------------------------

    def send(self, request: Request, *, process: str = "c0", attempt: int = 1,
             timeout: float | None = None, instance: int = 0) -> Event:
        return self.client.send(request, process=process, attempt=attempt, timeout=timeout,
                                instance=instance)

    def retry_until_answer(self, request: Request, *, first_attempt: int = 2,
                           process: str = "c0", instance: int = 0) -> list[Event]:
        """Retry with the same key, as a careful client does, until a final answer."""
        return self.client.send_until_answer(request, process=process, policy=self.policy,
                                             rng=self.rng, first_attempt=first_attempt,
                                             instance=instance)

    def slowed(self, request: Request, slow_ms: int) -> Request:
        """``request`` carrying the target's slow hook, asking for ``slow_ms`` more work."""
        slow = self.target.hooks.slow
        if slow is None:
            raise UsageError(f"target {self.target.name} has no slow hook ([hooks.slow])")
        return replace(request, headers={**request.headers,
                                         slow.header: slow.value.replace("{ms}", str(slow_ms))})

    def send_slowly(self, request: Request, *, slow_ms: int, process: str = "c0") -> Pending:
        """Send ``request`` with the slow hook, in the background, and return once the target
        reports it in progress: the original that a retry, a lease or a fault should meet."""
        slowed = self.slowed(request, slow_ms)
        pending = Pending(lambda: self.send(slowed, process=process),
                          timeout=self.target.client.timeout + slow_ms / 1000 + 5)
        self.wait_until_in_progress()
        return pending

    def converge(self, request: Request, *, first_attempt: int = 2, process: str = "c0",
                 instance: int = 0) -> list[Event]:
        """Retry until a final answer, as after a crash or an outage: when the key is still
        claimed by a request that died, let the promised lease run out on the target's clock
        (when it has a clock hook) instead of waiting for it."""
        first = self.send(request, process=process, attempt=first_attempt, instance=instance)
        if self.is_final(first):
            return [first]
        lease = self.target.promises.lease
        claimed = first.status == self.target.promises.in_progress_status
        if claimed and lease is not None and self.target.hooks.clock is not None:
            self.advance_clock(lease + 1)
        return [first, *self.retry_until_answer(request, first_attempt=first_attempt + 1,
                                                process=process, instance=instance)]

    def send_through(self, fault: Fault | str, request: Request, *, process: str = "c0",
                     attempt: int = 1, instance: int = 0) -> Event:
        """Send one request with ``fault`` active around it, on its own connection."""
        chosen = fault_named(fault) if isinstance(fault, str) else fault
        with self.nemesis.fault(chosen, instance=instance):
            return self.send(request, process=process, attempt=attempt, instance=instance,
                             timeout=self.target.client.fault_timeout)

    def concurrently(self, requests: Sequence[Request], *, instances: Sequence[int] = (0,),
                     attempt: int = 1, timeout: float | None = None) -> list[Event]:
        """Release all requests at once (a barrier, not sleeps); spread them over instances.
        ``timeout`` is each request's (a shorter one while a network fault acts)."""
        barrier = threading.Barrier(len(requests))
        results: list[Event | None] = [None] * len(requests)
        errors: list[BaseException] = []

        def worker(position: int, request: Request) -> None:
            try:
                barrier.wait(timeout=30)
                results[position] = self.send(
                    request, process=f"c{position}", attempt=attempt, timeout=timeout,
                    instance=instances[position % len(instances)],
                )
            except BaseException as exc:  # surfaced below, in the scenario's thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i, r)) for i, r in enumerate(requests)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=self.target.client.timeout + 60)
        if errors:
            raise errors[0]
        return [r for r in results if r is not None]

    def ensure_instances(self, count: int) -> int:
        """Run ``count`` target processes when the harness starts the target; how many run."""
        if self.target.start is not None:
            self.deployment.ensure_instances(count)
            self.client.urls = [i.url for i in self.deployment.instances]
        return len(self.deployment.instances)

    def wait_until_in_progress(self, *, timeout: float = 5.0) -> None:
        """Return once the target reports a key in progress (or after a short pause when it
        cannot say), so the next request meets an original that is still running."""
        hook = self.target.hooks.store_size
        if hook is None or not hook.in_progress:
            time.sleep(0.3)  # the target cannot say: give the request time to be claimed
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.deployment.store_size().get("in_progress", 0) > 0:
                return
            time.sleep(0.02)

    def is_final(self, event: Event) -> bool:
        return is_final(event, self.target.promises)

    # ---- nemesis ---------------------------------------------------------------------------

    @contextmanager
    def fault(self, fault: Fault | str, *, instance: int | None = None) -> Iterator[None]:
        chosen = fault_named(fault) if isinstance(fault, str) else fault
        with self.nemesis.fault(chosen, instance=instance):
            yield

    def advance_clock(self, seconds: float) -> None:
        self.nemesis.advance_clock(seconds)

    def crash_during(self, request: Request, point: str, *, process: str = "c0",
                     instance: int = 0) -> Event:
        """Send ``request`` so that the target dies at ``point``, then restart it.

        With a crash header the target dies by itself at the named point; with a signal the
        harness kills it while the request is in flight (the target must be slow enough, so the
        request carries the slow hook when the target has one).
        """
        hook = self.target.hooks.crash
        if hook is None:
            raise UsageError(f"target {self.target.name} has no crash hook")
        if hook.header is not None:
            if point not in hook.points:
                raise UsageError(f"the crash hook has no point {point!r}; it has "
                                 f"{', '.join(hook.points)}")
            crashing = replace(request,
                               headers={**request.headers, hook.header: hook.points[point]})
            completion = self.send(crashing, process=process, instance=instance)
            self.deployment.wait_for_exit(instance, timeout=10)
            self.nemesis.crashed(f"hook:{point}", instance)
        else:
            completion = self._kill_while_in_flight(request, process=process, instance=instance)
        self.nemesis.restart(instance)
        return completion

    def _kill_while_in_flight(self, request: Request, *, process: str, instance: int) -> Event:
        """SIGKILL the target once ``request`` is being handled (seen in progress when the
        target can say so), then collect the client's side of the crash."""
        if self.target.hooks.slow is not None:
            request = self.slowed(request, 3000)
        in_flight = Pending(lambda: self.send(request, process=process, instance=instance),
                            timeout=self.target.client.timeout + 10)
        self.wait_until_in_progress()
        self.nemesis.kill(instance)
        return in_flight.wait()

    # ---- observations ----------------------------------------------------------------------

    def observe_store_size(self) -> dict[str, int]:
        size = self.deployment.store_size()
        self.history.record("ok", "store-size", ORACLE, value=dict(size))
        return size

    def collect_effects(
        self, identities: Sequence[tuple[str | None, str | None]] | None = None,
    ) -> None:
        """Ask the oracle about every (tenant, key) the history used, or only ``identities``
        (those whose count may have changed): the judge's evidence."""
        oracle = self.deployment.oracle
        assert oracle is not None
        wanted = identities_sent(self.history.events()) if identities is None else identities
        for tenant, key in wanted:
            record_effects(self.history, oracle, tenant, key)

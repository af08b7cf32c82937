"""The context an HTTP scenario runs in: ``ScenarioContext``.

A scenario (``harness._scenario``) decides what happens when and asserts nothing; against an
HTTP service it acts only through this context, which sends requests through the recording
client, faults and kills through the nemesis, moves the clock, counts effects through the
oracle, and records every step into the history.  It exposes only what the target file
promises, so every scenario runs against any target, or says why it cannot.
"""

from __future__ import annotations

import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from harness._errors import UsageError
from harness._history import NEMESIS, ORACLE, Event, History
from harness._nemesis import Fault
from harness._scenario import NotApplicable, Scenario
from harness._target import (
    LEASE_SLACK,
    REAL_LEASE_LIMIT,
    Endpoint,
    ErrorPolicy,
    render_template,
)
from harness.evidence._oracle import (
    answered_without_a_charge,
    identities_sent,
    last_counts,
    record_effects,
    record_total,
)
from harness.http._client import RecordingClient, Request, RetryPolicy
from harness.http._deployment import Deployment
from harness.http._nemesis import Nemesis, fault_named
from harness.judging._analysis import copies_met, is_final
from harness.services._commit_proxy import AfterWrite, Watch

__all__ = ["Pending", "ScenarioContext"]

#: Seconds past the lease before the harness counts it as run out on the target's side: past
#: the checker's own slack, so a retry it sends counts as after the lease.
PAST_THE_LEASE = LEASE_SLACK + 1.0
#: Retries sent once the lease has run out, so an execution the takeover made is seen.
RETRIES_AFTER_LEASE = 2
#: Seconds after which a failed question to the oracle means it is out, not that one key
#: could not be counted (a key it refuses fails at once).
SLOW_ORACLE_FAILURE = 1.0
#: The pauses before the oracle is asked again about a key answered 2xx with nothing charged:
#: a service that answers before it commits (the reference's ack-before-commit) charges a few
#: milliseconds late, and one whose effects are read from a replica shows them as late as the
#: replica lags (up to a second here).  Only a key that shows nothing costs the wait, but a
#: flaw that answers 2xx for nothing (a replay across tenants) costs it before it is found.
LATE_CHARGE_PAUSES = (0.05, 0.15, 0.3, 0.5)
#: How long a request killed in flight is slowed (where the target has a slow hook), and how
#: long the kill waits at most to see it in progress: two thirds of that, so it lands inside.
KILL_SLOW_MS = 3000
KILL_SIGHT_SECONDS = KILL_SLOW_MS / 1000 * 2 / 3

class Pending:
    """A request running in its own thread; ``wait`` gives its completion."""

    def __init__(self, send: Callable[[], Event], *, timeout: float) -> None:
        self._result: list[Event] = []
        self._timeout = timeout
        # A daemon: a run stopped by Ctrl-C must not wait at exit for a request in flight.
        self._thread = threading.Thread(target=lambda: self._result.append(send()),
                                        daemon=True)
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
        self._thread = threading.get_ident()  # the scenario's thread, where exits are noticed

    # ---- identities and bodies -------------------------------------------------------------

    def new_key(self) -> str:
        with self._lock:
            self._counter += 1
            return f"{self._prefix}-{self._counter:04d}"

    def tenant(self, name: str = "a") -> str | None:
        """A tenant unique to this run, or None when the target has no tenants."""
        return f"{name}-{self._prefix}" if self.target.tenant is not None else None

    def fresh_values(self) -> dict[str, Any]:
        """New values for every placeholder a body template may use."""
        return {"amount": self.rng.randint(100, 99_999), "nonce": uuid.uuid4().hex,
                "customer": f"cus_{self.rng.randint(1000, 9999)}"}

    def body(self, operation: Endpoint | None = None, **values: Any) -> Any:
        """A request body from the template of ``operation`` (default: the primary one) with
        fresh values."""
        template = (operation or self.target.endpoint).body
        return render_template(template, {**self.fresh_values(), **values})

    def request(self, key: str | None, body: Any = None, *, operation: Endpoint | None = None,
                **fields: Any) -> Request:
        """A request with ``key``; with ``operation`` it goes to that declared operation."""
        tenant = fields.pop("tenant", self.tenant())
        if operation is not None:
            fields.setdefault("method", operation.method)
            fields.setdefault("path", operation.path)
        return Request(key=key, tenant=tenant,
                       body=self.body(operation) if body is None else body, **fields)

    # ---- sending ---------------------------------------------------------------------------

    def send(self, request: Request, *, process: str = "c0", attempt: int = 1,
             timeout: float | None = None, instance: int = 0) -> Event:
        self._between_steps()
        return self.client.send(request, process=process, attempt=attempt, timeout=timeout,
                                instance=instance)

    def retry_until_answer(self, request: Request, *, first_attempt: int = 2,
                           process: str = "c0", instance: int = 0,
                           policy: RetryPolicy | None = None,
                           errors: ErrorPolicy | None = None) -> list[Event]:
        """Retry with the same key, as a careful client does, until a final answer (``errors``:
        the policy of the handler fault the key met, where it has its own)."""
        self._between_steps()
        return self.client.send_until_answer(request, process=process,
                                             policy=policy or self.policy, rng=self.rng,
                                             first_attempt=first_attempt, instance=instance,
                                             errors=errors)

    def _between_steps(self) -> None:
        """Before each step the scenario's own thread takes: notice a process that exited by
        itself.  Background threads do not look, so a crash the scenario is causing (and will
        wait for) is never mistaken for one."""
        if threading.get_ident() == self._thread:
            self.notice_exits()

    def notice_exits(self) -> list[int]:
        """Record every target process that exited by itself (``exit``, with its return code)
        and start it again, so the scenario goes on against a running target; the numbers of
        the instances that had exited."""
        exited = self.deployment.exited_by_themselves()
        for number, code in exited:
            self.nemesis.exited(number, code, self.scenario.name)
            self.nemesis.restarted(number, self.deployment.start_again(number))
        return [number for number, _ in exited]

    def send_keyless_alone(self, request: Request, *, process: str = "c0",
                           attempt: int = 1) -> Event:
        """Send a request without a key with nothing else running and the total of charges
        counted just before and just after it: when the target can count keyless charges only
        as a total, the difference is this request's own."""
        oracle = self.deployment.oracle
        assert oracle is not None
        record_total(self.history, oracle)
        completion = self.send(request, process=process, attempt=attempt)
        record_total(self.history, oracle)
        return completion

    def measure_latency(self, samples: int = 5, *, operation: Endpoint | None = None) -> float:
        """The median seconds an ordinary request takes (each with a fresh key, labelled
        ``latency-probe``): how soon after an original its retry must leave to meet it still
        running, on a target without a slow hook."""
        took = []
        for _ in range(samples):
            started = time.monotonic()
            answer = self.send(self.request(self.new_key(), operation=operation,
                                            label="latency-probe"))
            if answer.status is not None:
                took.append(time.monotonic() - started)
        return statistics.median(took) if took else 0.0

    def slowed(self, request: Request, slow_ms: int) -> Request:
        """``request`` carrying the target's slow hook, asking for ``slow_ms`` more work."""
        slow = self.target.hooks.slow
        if slow is None:
            raise UsageError(f"target {self.target.name} has no slow hook ([hooks.slow])")
        return replace(request, headers={**request.headers,
                                         slow.header: slow.value.replace("{ms}", str(slow_ms))})

    def send_slowly(self, request: Request, *, slow_ms: int, process: str = "c0") -> Pending:
        """Send ``request`` with the slow hook, in the background, and return once the target
        reports it in progress: the original that a retry, a lease or a fault should meet.  The
        client waits as long as the handler is slowed, so the original is not cut short."""
        slowed = self.slowed(request, slow_ms)
        timeout = max(self.target.client.timeout, slow_ms / 1000 + 5)
        pending = Pending(lambda: self.send(slowed, process=process, timeout=timeout),
                          timeout=timeout + 5)
        self.wait_until_in_progress()
        return pending

    def converge(self, request: Request, *, first_attempt: int = 2, process: str = "c0",
                 instance: int = 0, errors: ErrorPolicy | None = None) -> list[Event]:
        """Retry until a final answer, as after a crash, an outage or a handler error (whose
        own policy is ``errors``).  While the key is still claimed by a request that died or
        failed, outwait the promised lease (``outwait_lease``): the retry budget alone may be
        far shorter than a lease of minutes."""
        started = time.monotonic()
        answers = [self.send(request, process=process, attempt=first_attempt, instance=instance)]

        def final(event: Event) -> bool:
            return is_final(event, self.target.promises, errors=errors)

        if not final(answers[-1]) and not self._claimed(answers[-1]):
            answers += self.retry_until_answer(request, first_attempt=first_attempt + 1,
                                               process=process, instance=instance,
                                               errors=errors)
        if not final(answers[-1]) and self._claimed(answers[-1]):
            answers += self.outwait_lease(request, since=started,
                                          first_attempt=(answers[-1].attempt or 1) + 1,
                                          process=process, instance=instance, errors=errors)
        return answers

    def _claimed(self, event: Event) -> bool:
        return self.target.promises.says_in_progress(event.status)

    def outwait_lease(self, request: Request, *, since: float, first_attempt: int,
                      process: str = "c0", instance: int = 0,
                      errors: ErrorPolicy | None = None) -> list[Event]:
        """Retry a key that is claimed by a dead or stalled request until its promised lease
        has surely run out (``since``: when the claim was made, or later), then a few more.

        With a clock the harness moves the lease runs out on it at once; without one, a
        lease up to ``REAL_LEASE_LIMIT`` is outwaited in real time, retrying with backoff; a
        longer one cannot be, and a ``lease-not-waited`` event says so, so the checker can
        call the key unknown rather than stuck.  Without a promised lease there is nothing to
        wait for: the ordinary budget."""
        lease = self.target.promises.lease
        if lease is None or not (self.lease_on_the_clock or lease <= REAL_LEASE_LIMIT):
            if lease is not None:
                self.lease_not_waited(request)
            return self.retry_until_answer(request, first_attempt=first_attempt,
                                           process=process, instance=instance, errors=errors)
        policy = self.policy
        if self.lease_on_the_clock:
            self.advance_clock(lease + 1)
        else:
            policy = policy.covering(since + lease + PAST_THE_LEASE - time.monotonic())
        answers = self.retry_until_answer(request, first_attempt=first_attempt, process=process,
                                          instance=instance, policy=policy, errors=errors)
        for _ in range(RETRIES_AFTER_LEASE):
            time.sleep(self.policy.delay(1, None, self.rng))
            answers.append(self.send(request, process=process, instance=instance,
                                     attempt=(answers[-1].attempt or 1) + 1))
        return answers

    def pass_lease(self, request: Request, *, since: float) -> bool:
        """Let the promised lease of the claim made at ``since`` run out, for ``request``'s key:
        advance the target's clock past it (hook or libfaketime), or sleep it out in real time
        when it is at most ``REAL_LEASE_LIMIT`` (always, for a lease the service renews on a
        timer of its own).  False, with a ``lease-not-waited`` event, when neither is
        possible."""
        lease = self.target.promises.lease
        if lease is None:
            raise UsageError(f"target {self.target.name} promises no lease")
        if not self.lease_on_the_clock and lease > REAL_LEASE_LIMIT:
            self.lease_not_waited(request)
            return False
        if self.lease_on_the_clock:
            self.advance_clock(lease + 1)
        else:
            time.sleep(max(0.0, since + lease + PAST_THE_LEASE - time.monotonic()))
        return True

    @property
    def lease_on_the_clock(self) -> bool:
        """Does a lease run out when the clock is moved past it: the harness can move the
        target's clock, knows where it stands (no restart left it unknown), and the service
        renews no lease on a timer of its own?  Not on a target the harness restarts whose file
        does not say what a restart does to its clock (neither ``read`` nor
        ``restart_resets``): a jump there would leave the clock unknown after every later
        restart, and leases judged across it unknown, so a lease is waited out in real time."""
        keeper = self.deployment.clock_keeper
        blind = keeper is not None and not keeper.knows_restarts and self.target.can_restart
        return (self.target.lease_runs_out_on_the_clock and self.deployment.clock_known
                and not blind)

    def send_through(self, fault: Fault | str, request: Request, *, process: str = "c0",
                     attempt: int = 1, instance: int = 0) -> Event:
        """Send one request with ``fault`` active around it, on its own connection."""
        chosen = fault_named(fault) if isinstance(fault, str) else fault
        with self.nemesis.fault(chosen, instance=instance):
            return self.send(request, process=process, attempt=attempt, instance=instance,
                             timeout=self.target.client.fault_timeout)

    def lease_not_waited(self, request: Request | None = None) -> None:
        """Record that the promised lease could not be outwaited (for ``request``'s key, when
        given), so the checker says "unknown" where only a wait could have decided."""
        lease = self.target.promises.lease or 0.0
        self.history.record(
            "info", "lease-not-waited", NEMESIS,
            key=request.key if request else None, tenant=request.tenant if request else None,
            value={"lease": lease,
                   "reason": f"the promised lease ({lease:g} s) is longer than the "
                             f"{REAL_LEASE_LIMIT:g} s the harness waits in real time, and the "
                             "harness cannot move the target's clock"},
        )

    def concurrently(self, requests: Sequence[Request], *, instances: Sequence[int] = (0,),
                     attempt: int = 1, timeout: float | None = None,
                     stagger: float = 0.0) -> list[Event]:
        """Release all requests at once (a barrier, not sleeps); spread them over instances.
        ``timeout`` is each request's (a shorter one while a network fault acts).  With
        ``stagger`` the n-th request leaves n times that many seconds after the first: retries
        spread over the original's own running time."""
        barrier = threading.Barrier(len(requests))
        results: list[Event | None] = [None] * len(requests)
        errors: list[BaseException] = []

        def worker(position: int, request: Request) -> None:
            try:
                barrier.wait(timeout=30)
                if stagger and position:
                    time.sleep(stagger * position)
                results[position] = self.send(
                    request, process=f"c{position}", attempt=attempt, timeout=timeout,
                    instance=instances[position % len(instances)],
                )
            except BaseException as exc:  # surfaced below, in the scenario's thread
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(i, r), daemon=True)
                   for i, r in enumerate(requests)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=self.target.client.timeout + 60)
        if errors:
            raise errors[0]
        return [r for r in results if r is not None]

    def ensure_instances(self, count: int) -> int:
        """Run ``count`` target processes when the harness starts the target and the target
        file says its processes share one store (``start.shared_state``); how many run.  Two
        processes with a store each are two services: a retry sent to the other one is not a
        retry, and whatever it does proves nothing."""
        if self.target.start is not None and (count <= 1 or self.target.shares_state):
            self.deployment.ensure_instances(count)
            self.client.urls = [i.url for i in self.deployment.instances]
        return len(self.deployment.instances)

    def wait_until_in_progress(self, *, timeout: float = 5.0) -> bool:
        """Return once the target reports a key in progress (True), or after a short pause when
        it cannot say (False), so the next request is likely to meet a running original.  Only
        likely: the checker judges from the recorded times whether it did, never from this.
        What was seen is recorded (``in-progress``), so a reproduction waits for it too."""
        hook = self.target.hooks.store_size
        if hook is None or not hook.reports_in_progress:
            time.sleep(0.3)  # the target cannot say: give the request time to be claimed
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            seen = self.deployment.store_size().get("in_progress", 0)
            if seen > 0:
                self.history.record("ok", "in-progress", ORACLE, value={"in_progress": seen})
                return True
            time.sleep(0.02)
        return False

    def is_final(self, event: Event) -> bool:
        return is_final(event, self.target.promises)

    def copies_met(self, answers: Sequence[Event]) -> bool:
        """Do the answers of copies sent together show that they ran at the same time?"""
        return copies_met(answers, self.target.promises)

    def intend(self, what: str, request: Request, properties: tuple[str, ...],
               **details: Any) -> None:
        """Record what the next step is meant to bring about for ``request``'s key (``what``:
        a precondition the checker knows), so the checker can tell whether it did."""
        self.history.intend(what, request.key, properties, tenant=request.tenant, **details)

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
        target can say so), then collect the client's side of the crash.  The wait for the
        sight ends well inside the slowed handler: a kill that came only after the handler's
        work would test a crash in its last moments (between its writes), not in the middle."""
        if self.target.hooks.slow is not None:
            request = self.slowed(request, KILL_SLOW_MS)
        in_flight = Pending(lambda: self.send(request, process=process, instance=instance),
                            timeout=self.target.client.timeout + 10)
        self.wait_until_in_progress(timeout=KILL_SIGHT_SECONDS)
        self.nemesis.kill(instance)
        return in_flight.wait()

    def send_watched(self, request: Request, *, plan: AfterWrite | None = None,
                     process: str = "c0", instance: int = 0) -> tuple[Event, Watch]:
        """Send ``request`` while the store proxy counts its writes (``store-write`` events) and
        strikes as ``plan`` says; the watch ends once the store has been quiet a moment after
        the answer, so writes made after answering count too.  A target killed at a write is
        started again before this returns."""
        with self.nemesis.watching_writes(request.key or "", request.tenant, plan=plan,
                                          instance=instance) as watch:
            completion = self.send(request, process=process, instance=instance)
        if plan is not None and plan.fault == "kill" and watch.struck is not None:
            self.nemesis.restart(instance)
        return completion, watch

    def not_applicable(self, reason: str) -> None:
        """End the scenario as n/a: what it needs did not happen on this target."""
        raise NotApplicable(reason)

    # ---- observations ----------------------------------------------------------------------

    def observe_store_size(self) -> dict[str, int]:
        size = self.deployment.store_size()
        self.history.record("ok", "store-size", ORACLE, value=dict(size))
        return size

    def collect_effects(
        self, identities: Sequence[tuple[str | None, str | None]] | None = None,
    ) -> None:
        """Ask the oracle about every (tenant, key) the history used, or only ``identities``
        (those whose count may have changed): the judge's evidence.  A key answered 2xx whose
        count found nothing is asked again after each of ``LATE_CHARGE_PAUSES``: a charge that
        shows late (committed after the answer, or read from a replica that lags) is late,
        not lost, and a lost one is still lost after them.  Once a question has
        failed only after ``SLOW_ORACLE_FAILURE`` seconds, the oracle is taken to be out (an
        admin endpoint reading a store the story took down times out): the keys left are
        recorded as not counted, as a failure would have recorded them, without the wait
        (a PostgreSQL exploration spent 650 of its 800 s on such failures, two seconds each)."""
        wanted = identities_sent(self.history.events()) if identities is None else identities
        self._ask_oracle(wanted)
        asked = set(wanted)
        for pause in LATE_CHARGE_PAUSES:
            events = self.history.events()
            late = [identity for identity in answered_without_a_charge(events, last_counts(events))
                    if identity in asked]  # a key found lost in an earlier look stays lost
            if not late:
                break
            time.sleep(pause)
            self._ask_oracle(late)

    def _ask_oracle(self, wanted: Sequence[tuple[str | None, str | None]]) -> None:
        oracle = self.deployment.oracle
        assert oracle is not None
        out: str | None = None
        for tenant, key in wanted:
            if out is not None:
                self.history.record("fail", "effects", ORACLE, tenant=tenant, key=key,
                                    error=f"not asked: {out}")
                continue
            asked = time.monotonic()
            answer = record_effects(self.history, oracle, tenant, key)
            if answer.type == "fail" and time.monotonic() - asked >= SLOW_ORACLE_FAILURE:
                out = (f"the oracle failed after {time.monotonic() - asked:.1f} s for another "
                       f"key in the same look ({answer.error})")

"""One example's world: fresh keys and tenants, its own history, and the steps taken so far.

On the deployment every example shares.

The world performs actions through the same context the scenarios use (recording client,
nemesis, oracle), so every request, fault and clock jump lands in the history.  It never judges:
``judge`` only hands the history to the checker.  ``settle`` ends a story the way careful clients
would, healing the network and retrying every operation that has no final answer, because
"retries after a crash converge" (P9) can only be judged once the clients have tried.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness._errors import ServiceError
from harness._history import ORACLE, Event, History
from harness._target import ErrorPolicy, keyless_counting
from harness.evidence._oracle import last_counts, record_total
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._failure import Failure
from harness.explore._keys import KeyMaker, KeyPlan
from harness.explore._scenario import EXPLORER
from harness.explore._steps import StepRecord
from harness.explore._strategies import PAST_THE_LEASE
from harness.http._client import Request, RetryPolicy
from harness.http._context import ScenarioContext
from harness.http._deployment import Deployment
from harness.http._nemesis import fault_named
from harness.http._variations import REUSE_LABEL
from harness.http.explore._actions import (
    Action,
    AfterWriteFault,
    AwaitAnswers,
    Burst,
    BurstAgain,
    Crash,
    HandlerFault,
    HostileBody,
    Keyless,
    NewRequest,
    Overlap,
    Retry,
    Reuse,
    Slow,
    Wait,
    kind_of,
)
from harness.http.explore._answers import answer_text
from harness.http.explore._background import RUNNING, Background
from harness.http.explore._bodies import spell
from harness.http.explore._routes import Routes
from harness.judging._analysis import Identity, View, is_final
from harness.judging._checker import CheckOptions, CheckResult, check_history
from harness.judging._findings import Finding
from harness.services._commit_proxy import AfterWrite

__all__ = ["CAREFUL_CLIENT", "World"]

#: The explorer's clients retry as a careful client does, but briskly: a story ends in seconds.
CAREFUL_CLIENT = RetryPolicy(max_attempts=4, base_delay=0.02, max_delay=0.1)
#: How many times the oracle is asked again when answers keep landing while it is asked.
LOOKS = 5
#: How long a healed database fault may take to stop showing, and how many answers in a row
#: show it has.
STORE_RECOVERY = 10.0
STORE_ANSWERS = 3


@dataclass
class _Operation:
    """A keyed operation the story may retry or reuse: its first request, attempts so far."""

    name: str
    request: Request
    attempts: int = 1
    born: float = 0.0  # the seconds the target's clock had been moved when it was first sent
    errors: ErrorPolicy | None = None  # the error policy of the handler fault it met
    died: bool = False  # its request died or failed, and may hold the key until its lease

    @property
    def identity(self) -> Identity:
        return _identity(self.request)


def _identity(request: Request) -> Identity:
    return (request.tenant, request.key)


class World:
    """Performs one story's actions against a running deployment and records them."""

    def __init__(self, deployment: Deployment, *, retry_horizon: float,
                 trust_moved_clock: bool = False) -> None:
        self.deployment = deployment
        self.target = deployment.target
        self.retry_horizon = retry_horizon
        self.options = CheckOptions.for_target(self.target, retry_horizon,
                                               trust_moved_clock=trust_moved_clock)
        self.history = History()
        self.context = ScenarioContext(scenario=EXPLORER, deployment=deployment,
                                       history=self.history, rng=random.Random(uuid.uuid4().int),
                                       policy=CAREFUL_CLIENT)
        self.keys = KeyMaker(self.target.key)
        self._routes = Routes(self.context)
        self.steps: list[StepRecord[Action]] = []
        self._operations: dict[str, _Operation] = {}
        self._faults_on: list[str] = []
        self._background = Background(self.context)
        self._crashed = False
        self._handler_failed = False
        self._moved = 0.0  # seconds the story has moved the target's clock
        self._renewed = False  # a key was sent again after its retention ran out
        self._database_faulted = False  # a fault acted on the target's database
        #: Once set, nothing more happens in this world.
        self.failure: Failure[Action] | None = None
        #: Findings seen only with a moved clock, kept for the real-time telling at the end.
        self.doubted: list[Finding] = []
        self._observed = 0  # history events already seen by the oracle's last look
        hooks = self.target.hooks
        self._watches_storage = bool(hooks.store_size and self.target.moves_clock)
        self._rows_before = self._table_rows() if self._watches_storage else 0

    # ---- acting ----------------------------------------------------------------------------

    def step(self, action: Action) -> StepRecord[Action]:
        """Perform one drawn action and record it as the story's next step."""
        number = sum(1 for s in self.steps if not s.settle) + 1
        return self._record(action, number, settle=False)

    def _record(self, action: Action, number: int, *, settle: bool) -> StepRecord[Action]:
        record: StepRecord[Action] = StepRecord(number, kind_of(action), action.text(), action,
                                                settle=settle, first_event=len(self.history))
        self.steps.append(record)
        record.response, record.identity = self._perform(action, record)
        record.last_event = len(self.history)
        return record

    def _perform(self, action: Action,
                 record: StepRecord[Action]) -> tuple[str | None, Identity | None]:
        match action:
            case NewRequest():
                request = self._new_operation(action.id, action.tenant, action.key, action.body)
                return self._answer(self._send(request)), _identity(request)
            case Retry():
                operation = self._operations[action.id]
                if action.once_answered:
                    self._background.join()
                raw = spell(operation.request.body, action.spelling)
                return self._answer(self._again(operation, replace(
                    operation.request, raw_body=raw, label="retry"))), operation.identity
            case Reuse():
                operation = self._operations[action.id]
                what = f"field:{action.field}" if action.change == "field" else action.change
                changed = replace(operation.request, body=action.body, path=action.path,
                                  method=action.method, label=f"{REUSE_LABEL}{what}")
                if action.change in ("path", "method"):  # a story saved before issue 13
                    changed = replace(changed, body=operation.request.body)
                return self._answer(self._again(operation, changed)), operation.identity
            case BurstAgain():
                operation = self._operations[action.id]
                self._note_renewal(operation)
                again = replace(operation.request, label="burst-again")
                return self._burst(action.id, again, action.copies,
                                   first_attempt=operation.attempts + 1), operation.identity
            case Overlap():
                request = self._new_operation(action.id, action.tenant, action.key, action.body,
                                              label="original")
                return self._overlap(action, request), _identity(request)
            case HandlerFault():
                fault = next(f for f in self.target.hooks.handler_faults if f.name == action.fault)
                request = self._new_operation(action.id, action.tenant, action.key, action.body,
                                              label=f"handler:{fault.name}")
                self._operations[action.id].errors = fault.errors
                self._operations[action.id].died = True
                self._handler_failed = True
                faulted = replace(request, headers={**request.headers, fault.header: fault.value})
                return self._answer(self._send(faulted)), _identity(request)
            case Burst():
                request = self._new_operation(action.id, action.tenant, action.key, action.body,
                                              label="burst")
                return self._burst(action.id, request, action.copies), _identity(request)
            case AfterWriteFault():
                request = self._new_operation(action.id, action.tenant, action.key, action.body,
                                              label=f"{action.fault}-after-write-{action.write}")
                completion, watch = self.context.send_watched(
                    request, plan=AfterWrite(action.write, action.fault))
                struck = watch.struck is not None
                self._crashed = self._crashed or (struck and action.fault == "kill")
                self._database_faulted = self._database_faulted or struck
                self._operations[action.id].died = struck
                what = ("" if struck else f"; the fault did not strike: "
                        f"{len(watch.writes)} write(s)")
                return self._answer(completion) + what, _identity(request)
            case Keyless():
                request = Request(key=None, tenant=self.context.tenant(action.tenant),
                                  body=action.body, label="keyless")
                return self._keyless(request), _identity(request)
            case HostileBody():
                key, _ = self.keys.make(action.key)
                request = Request(key=key, tenant=self.context.tenant(action.tenant),
                                  body=action.body, label=f"hostile:{action.why}")
                return self._answer(self._send(request)), _identity(request)
            case Wait():
                time.sleep(action.seconds)
                return None, None
            case AwaitAnswers():
                self._background.join()
                return None, None
            case FaultOn():
                self._switch(action.fault, on=True)
                return None, None
            case FaultOff():
                return self._switch(action.fault, on=False), None
            case Clock():
                return self._advance_clock(action.seconds, observe=not record.settle,
                                           cleanup=action.cleanup), None
            case Crash():
                request = self._new_operation(action.id, action.tenant, action.key, action.body,
                                              label=f"crash:{action.point}")
                answer = self._answer(self.context.crash_during(request, action.point))
                self._operations[action.id].died = True
                self._crashed = True
                return f"{answer}; the target died and was restarted", _identity(request)
            case Slow():
                return RUNNING, _identity(self._start_slow(action, record))
        raise AssertionError(f"unhandled action {action!r}")

    def _keyless(self, request: Request) -> str:
        """Send a keyless request.  When the oracle only counts every charge, it runs alone
        (slowed requests finished first) between two totals, whose difference the checker
        reads as its charges."""
        if keyless_counting(self.target.effects) != "total":
            return self._answer(self._send(request))
        self._background.join()
        oracle = self.deployment.oracle
        assert oracle is not None
        record_total(self.history, oracle)
        answer = self._answer(self._send(request))
        record_total(self.history, oracle)
        return answer

    def _switch(self, name: str, *, on: bool) -> str | None:
        """A fault on or off: on the client's route, or on the target's database proxy."""
        fault = fault_named(name)
        if on:
            self._faults_on.append(name)
        else:
            self._faults_on.remove(name)
        if fault.where == "client":
            self._routes.route([f for f in map(fault_named, self._faults_on)
                                if f.where == "client"])
            self._routes.record(fault, on=on)
            return None
        if on:
            self._database_faulted = True
            self.context.nemesis.inject(fault)
            return None
        self.context.nemesis.heal(fault)
        return self._store_recovers()

    def _store_recovers(self) -> str | None:
        """After a database fault heals, wait until the target's store answers again (its
        key-table hook, several times in a row, since a pool may hold more than one dead
        connection), so the next step, or the next example, does not meet the fault's
        aftermath while the history says it was healed."""
        if self.target.hooks.store_size is None:
            return None
        deadline = time.monotonic() + STORE_RECOVERY
        answered = 0
        while answered < STORE_ANSWERS:
            try:
                self.deployment.store_size()
                answered += 1
            except ServiceError:
                answered = 0
                if time.monotonic() >= deadline:
                    return f"the store still does not answer after {STORE_RECOVERY:g} s"
                time.sleep(0.1)
        return "the store answers again"

    def _burst(self, name: str, request: Request, copies: int, *, first_attempt: int = 1) -> str:
        """Release the copies together; each one told "in progress" then retries until it
        gets the final answer, as the clients of a retry storm do."""
        answers = self.context.concurrently([request] * copies, timeout=self._timeout(),
                                            attempt=first_attempt)
        first = Counter(self._answer(a) for a in answers)
        text = ", ".join(f"{answer} x{n}" for answer, n in first.items())
        later: list[Event] = []
        promises = self.target.promises
        for position, answer in enumerate(answers):
            if promises.says_in_progress(answer.status):
                later += self._until_answered(replace(request, label="retry"),
                                              first_attempt=first_attempt + 1,
                                              process=f"c{position}")
        if later:
            settled = Counter(self._answer(a) for a in later)
            text += "; retried: " + ", ".join(f"{answer} x{n}" for answer, n in settled.items())
        self._operations[name].attempts = max([first_attempt,
                                               *(a.attempt or 1 for a in later)])
        return text

    def _overlap(self, action: Overlap, request: Request) -> str:
        """The original and, ``after_ms`` later, its retry or a reuse of its key, each on a
        connection of its own: the second meets the original still running when the delay is
        inside the target's latency (the checker reads from the times whether it did);
        ``in_order``, the second leaves once the original is answered."""
        second = (replace(request, label="retry") if action.second == "retry"
                  else replace(request, body=action.other_body, label=f"{REUSE_LABEL}body"))
        if action.in_order:
            answers = [self.context.send(r, process=f"c{position}", timeout=self._timeout())
                       for position, r in enumerate([request, second])]
        else:
            answers = self.context.concurrently([request, second],
                                                stagger=action.after_ms / 1000,
                                                timeout=self._timeout())
        self._operations[action.id].attempts = 2
        return "; then ".join(self._answer(a) for a in answers)

    def _new_operation(self, name: str, tenant: str, plan: KeyPlan, body: Any, *,
                       label: str = "") -> Request:
        key, header = self.keys.make(plan)
        request = Request(key=key, tenant=self.context.tenant(tenant), body=body,
                          key_header=header, label=plan.label or label)
        if not plan.hostile:
            self._operations[name] = _Operation(name, request, born=self._moved)
        return request

    def _timeout(self) -> float | None:
        """While a network fault acts, a request gives up after the target's fault timeout."""
        return self.target.client.fault_timeout if self._faults_on else None

    def _send(self, request: Request, *, attempt: int = 1) -> Event:
        return self.context.send(request, attempt=attempt, timeout=self._timeout())

    def _again(self, operation: _Operation, request: Request) -> Event:
        operation.attempts += 1
        self._note_renewal(operation)
        return self._send(request, attempt=operation.attempts)

    def _note_renewal(self, operation: _Operation) -> None:
        """A key sent again past its retention starts over with a new row in the key table,
        which P11 (counting keys by their first use) would take for a key never removed."""
        retention = self.target.promises.retention
        if retention is not None and self._moved - operation.born > retention:
            self._renewed = True

    def _answer(self, event: Event) -> str:
        return answer_text(event, self.target.promises)

    def _advance_clock(self, seconds: float, *, observe: bool,
                       cleanup: bool = True) -> str | None:
        """Move the target's clock, run its cleanup (unless told not to), and read its key
        table: the evidence for P11, unless the story renewed a key (see ``_note_renewal``),
        the cleanup job the target relies on did not run, or the clients are only settling."""
        self.context.advance_clock(seconds)
        self._moved += seconds
        has_job = self.target.hooks.cleanup is not None
        if has_job and cleanup:
            self.deployment.cleanup()
        if not self._watches_storage or not observe:
            return None
        if has_job and not cleanup:
            return "key table not read: the cleanup job has not run since the jump"
        if self._renewed:
            return "key table not read: a key was sent again after its retention"
        rows = self._table_rows()
        added = max(0, rows - self._rows_before)
        # The deployment is shared by every example, so the key table also holds earlier
        # examples' keys: the story is judged on the rows it added, the raw count kept beside.
        self.history.record("ok", "store-size", ORACLE,
                            value={"rows": added, "table_rows": rows,
                                   "rows_before_story": self._rows_before})
        return f"key table: {added} row(s) from this story"

    def _table_rows(self) -> int:
        return self.deployment.store_size()["rows"]

    def _start_slow(self, action: Slow, record: StepRecord[Action]) -> Request:
        request = self._new_operation(action.id, action.tenant, action.key, action.body,
                                      label="slow")
        base = self.target.client.fault_timeout if self._faults_on else self.target.client.timeout
        self._background.start(request, record, delay_ms=action.delay_ms,
                               timeout=base + action.delay_ms / 1000)
        return request

    # ---- observing and judging -------------------------------------------------------------

    def observe(self, *, every_key: bool = False) -> tuple[Event, ...]:
        """Ask the oracle about the keys whose charges may have changed since the last look
        (``every_key``: all of them), note on each new step how many charges its key has and
        what any finished background request got, and return the history to judge: one in
        which every request event was seen before the charges were counted.  A background
        answer that lands while the oracle is asked makes it look again, since the charge it
        reports may have been missed."""
        wanted = self._unsettled_identities()
        self.context.collect_effects(None if every_key else wanted)
        for _ in range(LOOKS):
            events = self.history.events()
            if not any(e.f == "request" and e.index >= self._observed for e in events):
                break
            self.context.collect_effects(self._unsettled_identities())
        counts = last_counts(events)
        for record in self.steps:
            if record.effects is None and record.identity in counts:
                record.effects = counts[record.identity][1]
        for step, completion in self._background.answered():
            step.response = self._background_answer(completion)
        return events

    def _unsettled_identities(self) -> list[Identity]:
        """Keys sent to or answered since the last look, and keys with an attempt that has no
        answer yet or lost it (the target may still be charging for those)."""
        events = self.history.events()
        completed = {e.op: e for e in events if e.f == "request" and e.type != "invoke"}
        wanted: list[Identity] = []
        for event in events:
            if event.f != "request" or event.type != "invoke" or event.identity in wanted:
                continue
            done = completed.get(event.op)
            if (done is None or done.type == "info"
                    or max(event.index, done.index) >= self._observed):
                wanted.append(event.identity)
        self._observed = len(events)
        return wanted

    def held_short(self) -> list[str]:
        """The slowed requests the target answered with success before their delay was out
        (``Background.held_short``)."""
        return self._background.held_short()

    def _background_answer(self, completion: Event) -> str:
        during = next((s.number for s in self.steps
                       if not s.settle and s.holds(completion.index)), None)
        when = f"during step {during}" if during else "between steps"
        return f"{self._answer(completion)} (answered {when})"

    def judge(self, events: Sequence[Event],
              properties: Sequence[str] | None = None) -> CheckResult:
        """The checker's verdict on ``events`` (all properties unless told)."""
        return check_history(events, self.options, properties=properties)

    # ---- ending ----------------------------------------------------------------------------

    def settle(self) -> None:
        """End the story as careful clients would: heal every fault, let slowed requests
        finish, retry every operation without a final answer until it gets one, and when a
        request that died, failed or lost its store still holds a key, let the promised lease
        run out (on the clock, or in real time where only real time passes it) and retry.
        """
        for name in list(self._faults_on):
            self._record(FaultOff(fault=name), len(self.steps) + 1, settle=True)
        self._background.join()
        self.deployment.restart_dead_instances()
        waiting = self._retry_unanswered(list(self._unsettled()))
        promises = self.target.promises
        stuck = [op for op, last in waiting if promises.says_in_progress(last.status)]
        failed = self._crashed or self._handler_failed or self._database_faulted
        if not (stuck and failed and promises.lease is not None):
            return
        past = promises.lease + PAST_THE_LEASE
        why = "past the lease of the request that died or failed"
        if self.context.lease_on_the_clock:  # the run's rule, restarts that lose it included
            self._record(Clock(seconds=past, why=why), len(self.steps) + 1, settle=True)
        elif self.target.lease_can_run_out:  # else a short lease is waited out in real time
            self._record(Wait(seconds=past, why=why), len(self.steps) + 1, settle=True)
        else:
            return
        for operation in stuck:
            operation.died = False  # past the lease, the careful client is patient again
        self._retry_unanswered(stuck)

    def _unsettled(self) -> list[_Operation]:
        """Operations with no final answer since the last crash (or ever, without one), and
        still within their retention: past it, a client's retry is a new operation.  A reuse
        of the key (another body) answers the reuse, not the operation: a crash's key reused
        and refused with 422 was taken as settled, and the lease was never waited out
        (ledger_sqlite's no-lease missed at seed 1)."""
        view = View(self.history.events())
        since = max((c.time for c in view.crashes), default=-1.0)
        retention = self.target.promises.retention
        return [
            operation for operation in self._operations.values()
            if (retention is None or self._moved - operation.born <= retention)
            and not self._answered(operation, view, since)
        ]

    def _answered(self, operation: _Operation, view: View, since: float) -> bool:
        """Has ``operation`` a final answer from an attempt sent after ``since``?  One whose
        request died or failed needs it from the attempt that ended last: P9 judges its key's
        convergence by the answers after the incident, and a retry lost in a network fault
        left that unknown where the handler's error was itself final (stored_errors)."""
        attempts = [a for a in view.by_identity.get(operation.identity, [])
                    if a.invoke.time > since and not a.label.startswith(REUSE_LABEL)]
        if operation.died and attempts:
            attempts = [max(attempts, key=lambda a: a.end_time)]
        promises = self.target.promises
        return any(a.completion is not None and not view.store_failed(a)
                   and is_final(a.completion, promises, errors=operation.errors)
                   for a in attempts)

    def _retry_unanswered(self, operations: list[_Operation]) -> list[tuple[_Operation, Event]]:
        """Retry each operation until answered; return each with its last answer."""
        last: list[tuple[_Operation, Event]] = []
        for operation in operations:
            number = len(self.steps) + 1
            record: StepRecord[Action] = StepRecord(
                number, "retry", f"state.retry_until_answered({operation.name})",
                Retry(id=operation.name), settle=True, first_event=len(self.history),
                identity=operation.identity)
            self.steps.append(record)
            self._note_renewal(operation)
            answers = self._until_answered(replace(operation.request, label="retry"),
                                           first_attempt=operation.attempts + 1,
                                           errors=operation.errors, held=operation.died)
            operation.attempts += len(answers)
            record.response = ", ".join(self._answer(a) for a in answers)
            record.last_event = len(self.history)
            last.append((operation, answers[-1]))
        return last

    def _until_answered(self, request: Request, *, first_attempt: int, process: str = "c0",
                        errors: ErrorPolicy | None = None, held: bool = False) -> list[Event]:
        """Retry as a careful client does until a final answer (a bounded number of times);
        while a network fault acts, each attempt gives up after the fault timeout.  ``errors``
        is the policy of the handler fault the operation met, where it has its own.  ``held``:
        a request of the key died or failed, so an answer "in progress" will stay so until
        its lease runs out; one is enough (settling lets the lease run out, then retries)."""
        answers: list[Event] = []
        promises = self.target.promises
        for attempt in range(first_attempt, first_attempt + CAREFUL_CLIENT.max_attempts):
            answer = self.context.send(request, process=process, attempt=attempt,
                                       timeout=self._timeout())
            answers.append(answer)
            if is_final(answer, promises, errors=errors) or (
                    held and promises.says_in_progress(answer.status)):
                break
            time.sleep(CAREFUL_CLIENT.delay(len(answers), (answer.headers or {}).get(
                "retry-after"), self.context.rng))
        return answers

    def close(self) -> None:
        """Leave the deployment as the next example needs it: no toxics, nothing running, a
        database that answers."""
        self.context.nemesis.heal_all()
        self._background.join()
        if self._database_faulted:
            self._store_recovers()
        self._routes.close()
        self.context.client.close()

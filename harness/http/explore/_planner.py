"""The generator's side of a story: what exists, what is on, and how draws become actions.

Which operations and keys exist, which faults are on, and how drawn values become actions.

Only drawn data and this bookkeeping decide what happens next, never an answer from the target,
so one seed always draws the same stories and Hypothesis can replay and shrink them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from harness._target import Target, keyless_counting
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._keys import KeyMaker, KeyPlan
from harness.explore._strategies import PAST_THE_LEASE, past_the_retention
from harness.http._nemesis import FAULTS
from harness.http._variations import (
    field_changes,
    fields_to_vary,
    operation_change,
    query_change,
)
from harness.http.explore._actions import (
    Action,
    AfterWriteFault,
    Burst,
    BurstAgain,
    Change,
    Crash,
    HandlerFault,
    HostileBody,
    Keyless,
    NewRequest,
    Overlap,
    Retry,
    Reuse,
    Slow,
    Spelling,
    Wait,
)
from harness.http.explore._bodies import Fill, another_body, render
from harness.http.explore._strategies import KeyChoice

__all__ = ["RUNNING_STEPS", "Planner", "can_retry_late", "keyless_alone", "real_time_slow_ms",
           "slow_ms"]

#: How long a slowed request runs, in ordinary requests' measured latencies, within bounds: long
#: enough to outlive the few steps that follow it, short enough that waiting for it as the story
#: ends does not dominate an example.  At a fixed 700 ms that wait was over half of the correct
#: reference server's exploration, whose steps take a few milliseconds (a crash, which ends the
#: request anyway, a few hundred); a loaded machine or a slow target, whose steps are slower
#: in proportion, gets up to the 700 ms every target had before (``slow_ms``).
SLOW_LATENCIES = 40
SLOW_MS_BOUNDS = (300, 700)
#: For how many steps the planner takes a slowed request to be still running.
RUNNING_STEPS = 3
#: A stand-in key prefix: the planner asks the key rules about keys shaped like the real ones.
_SKETCH_PREFIX = "k0000000000"


def can_retry_late(target: Target) -> bool:
    """Can a story retry a running request once its lease has run out?  (Without a lease,
    "late" is "at once".)"""
    return (target.promises.lease is None or target.lease_runs_out_on_the_clock
            or real_time_slow_ms(target) is not None)


#: The longest lease a story passes in real time while a slowed request runs: every example
#: that draws it waits that long, twice (the wait, then the request), so only short leases
#: (a heartbeat's few seconds) are worth it; in-flight-retry waits a lease of a minute once.
EXPLORE_REAL_LEASE = 10.0


def slow_ms(target: Target, latency_ms: int) -> int:
    """How long a slowed request runs on ``target``, where an ordinary request takes
    ``latency_ms``.  The longest bound where the steps wait fixed times of their own: the
    slowed request's step waits up to half its delay when the target cannot say it holds the
    key, and a faketime jump first waits for late writes (at 300 ms, redis_store's slowed
    request was over before the jump past its lease landed)."""
    shortest, longest = SLOW_MS_BOUNDS
    size = target.hooks.store_size
    if target.clock is not None or size is None or not size.reports_in_progress:
        return longest
    return min(longest, max(shortest, SLOW_LATENCIES * latency_ms))


def real_time_slow_ms(target: Target) -> int | None:
    """How long a slowed request must run for a retry to come after its lease in real time,
    or None when a lease is not passed in real time here (it is moved past on the clock, or
    it is too long to wait for in every example, or there is none)."""
    lease = target.promises.lease
    if lease is None or target.lease_runs_out_on_the_clock or lease > EXPLORE_REAL_LEASE:
        return None
    return int((lease + PAST_THE_LEASE + 1.0) * 1000)


def keyless_alone(target: Target) -> bool:
    """Must a keyless request run with nothing else in flight?  Yes when the oracle can only
    count every charge: the difference of totals around it is its charges only if it ran
    alone."""
    return keyless_counting(target.effects) == "total"


@dataclass(frozen=True)
class _Operation:
    id: str
    tenant: str
    body: Any
    reached: bool  # first sent with no fault on: the target surely saw it


class Planner:
    """Turns each drawn rule into its actions, keeping the names a story refers to."""

    def __init__(self, target: Target, *, latency_ms: int = 0) -> None:
        self.target = target
        self.latency_ms = latency_ms  # an ordinary request's measured latency
        self.operations: list[_Operation] = []  # keyed operations a retry or reuse may name
        self.faults_on: list[str] = []
        self._keys: list[tuple[str, str]] = []  # (name, tenant) of keys others derive from
        self._longest: list[str] = []  # the longest keys: a sibling pairs with one of them
        self._derived: set[tuple[str, str | None]] = set()  # (shape, of) already made
        self._identities: set[tuple[str, str]] = set()  # (tenant, key name) in use
        self._ops = 0
        self._names = 0
        self._actions = 0
        self._slowed: list[tuple[str, int, int]] = []  # (operation, actions before it, delay)
        self._moved = 0.0  # seconds the story moved the target's clock
        self._sketch = KeyMaker(target.key, prefix=_SKETCH_PREFIX)  # keys shaped as the story's
        self._bodies: dict[tuple[str, str], Any] = {}  # (tenant, key name) -> first body

    # ---- names -------------------------------------------------------------------------

    def _next_op(self) -> str:
        self._ops += 1
        return f"o{self._ops}"

    def _next_key(self) -> str:
        self._names += 1
        return f"k{self._names}"

    def _earlier(self, pick: int) -> tuple[str, str] | None:
        """An earlier key, counted back from the most recent (so shrinking picks the last)."""
        return self._keys[-1 - pick % len(self._keys)] if self._keys else None

    def _key(self, choice: KeyChoice, tenant: str) -> tuple[KeyPlan, str, Any | None]:
        """The key a new request uses, the tenant (a shared key belongs to the other), and for
        a key made from another the body that one's owner sent: only the tenant changes (a
        shared key), or only the key (a case twin, a sibling: the same tenant too), so a
        replay the target must not give is provoked rather than a refusal."""
        earlier = self._earlier(choice.pick)
        if choice.shape == "shared" and earlier is not None:
            name, owner = earlier
            other = "b" if owner == "a" else "a"
            if (other, name) not in self._identities:
                return KeyPlan(name=name), other, self._bodies.get((owner, name))
        plan = self._shaped(choice, earlier)
        if plan.of is not None:
            owner = next(t for n, t in reversed(self._keys) if n == plan.of)
            return plan, owner, self._bodies.get((owner, plan.of))
        return plan, tenant, None

    def _shaped(self, choice: KeyChoice, earlier: tuple[str, str] | None) -> KeyPlan:
        """A new key of the drawn shape when the target's key rules accept it (a case twin,
        say, is not a key under a lower-case pattern), else a plain one."""
        name = self._next_key()
        if choice.shape == "sibling" and self._longest:  # of a longest key: the two share
            # all but the last of as many characters as the target allows, so a store that
            # keeps fewer mixes them
            of = self._longest[-1 - choice.pick % len(self._longest)]
            plan = KeyPlan(name=name, shape="sibling", of=of)
            if ("sibling", of) not in self._derived and self._sketch.accepted(plan):
                self._derived.add(("sibling", of))
                return plan
        if choice.shape == "case-twin" and earlier is not None:
            plan = KeyPlan(name=name, shape="case-twin", of=earlier[0])
            if ("case-twin", earlier[0]) not in self._derived and self._sketch.accepted(plan):
                self._derived.add(("case-twin", earlier[0]))
                return plan
        if choice.shape == "hostile" and choice.kind and not self.faults_on:
            return KeyPlan(name=name, shape="hostile", kind=choice.kind)  # judged if answered
        if choice.shape == "odd" and choice.kind:
            return KeyPlan(name=name, shape="odd", kind=choice.kind)
        if choice.shape == "longest":
            plan = KeyPlan(name=name, shape="longest", text=choice.text[:1] or "x")
            if self._sketch.accepted(plan):
                return plan
        return KeyPlan(name=name, shape="plain", text=choice.text)

    def _operation(self, op: str, tenant: str, plan: KeyPlan, body: Any) -> None:
        self._sketch.make(plan)
        self._identities.add((tenant, plan.name))
        self._bodies.setdefault((tenant, plan.name), body)
        if plan.shape in ("plain", "longest"):
            self._keys.append((plan.name, tenant))
        if plan.shape == "longest":
            self._longest.append(plan.name)
        if not plan.hostile:
            self.operations.append(_Operation(op, tenant, body, not self.faults_on))

    def retryable(self) -> list[_Operation]:
        """Operations a retry or a reuse may name: every keyed one the story made."""
        return list(self.operations)

    def _target_op(self, pick: int) -> _Operation:
        retryable = self.retryable()
        return retryable[-1 - pick % len(retryable)]

    # ---- actions -----------------------------------------------------------------------

    def _drawn(self, *actions: Action) -> list[Action]:
        self._actions += len(actions)
        return list(actions)

    def database_up(self) -> bool:
        """No fault on the target's database: its clock and key-table hooks need it."""
        return not any(FAULTS[name].where == "store" for name in self.faults_on)

    def running(self) -> str | None:
        """The latest slowed operation if it started at most ``RUNNING_STEPS`` steps ago: the
        one a client retrying "while it still runs" names."""
        if self._slowed and self._actions - self._slowed[-1][1] <= RUNNING_STEPS:
            return self._slowed[-1][0]
        return None

    def request(self, tenant: str, choice: KeyChoice, body: Any) -> list[Action]:
        if choice.shape == "sibling" and not self._longest:  # the longest key it pairs with,
            # first: a sibling must otherwise wait for a longest key drawn by chance before it
            longest = self.request(tenant, replace(choice, shape="longest", text="0"), body)
            return longest + (self.request(tenant, choice, body) if self._longest else [])
        plan, tenant, shared_body = self._key(choice, tenant)
        body = body if shared_body is None else shared_body
        op = self._next_op()
        self._operation(op, tenant, plan, body)
        return self._drawn(NewRequest(id=op, tenant=tenant, key=plan, body=body))

    def again(self, pick: int, how: Spelling | Change, fill: Fill, *,
              variant: tuple[int, int] | None = None) -> list[Action]:
        """A retry in one of the spellings, or a reuse with one change (``variant``: which
        field and which of its changes, else ``pick`` chooses)."""
        reached = [o for o in self.retryable() if o.reached]
        match how:
            case "as-sent" | "keys-reversed" | "reindented" | "escaped":
                return self._drawn(Retry(id=self._target_op(pick).id, spelling=how))
            case _ if reached:
                return self._drawn(self._reuse(reached[-1 - pick % len(reached)], how, fill,
                                               pick, variant))
            case _:
                return self._drawn(Retry(id=self._target_op(pick).id))

    def retry_running(self, late: bool) -> list[Action]:
        """Retry the running slowed operation, at once or (``late``, with a lease) once its
        lease has run out, when another request may take its key over: past it on the clock,
        or in real time when only real time passes it (a renewed lease, no clock) and the
        request was slowed long enough to still run then."""
        running = self.running()
        assert running is not None  # the rule's precondition
        lease = self.target.promises.lease
        why = "past the lease of the running request"
        if late and lease is not None and self.target.lease_runs_out_on_the_clock:
            if self.database_up():
                self._moved += lease + PAST_THE_LEASE
                return self._drawn(Clock(seconds=lease + PAST_THE_LEASE, why=why),
                                   Retry(id=running))
        elif late and lease is not None and self._slowed[-1][2] >= (
                real_time_slow_ms(self.target) or float("inf")):
            return self._drawn(Wait(seconds=lease + PAST_THE_LEASE, why=why), Retry(id=running))
        return self._drawn(Retry(id=running))

    def outlive(self, tenant: str, body: Any) -> list[Action]:
        """A new slowed request that outlives its lease with no one taking its key over, then
        its retry once it has answered: the retry must get the stored response, however late
        the original finished (a server that lost the key's fingerprint with its lease refuses
        it as another request's; zombie-original's story).  Past the lease on the clock while
        the request runs; where only real time passes the lease, the request is slowed past
        it."""
        lease = self.target.promises.lease
        assert lease is not None  # the rule exists only with a lease
        on_the_clock = self.target.lease_runs_out_on_the_clock
        slow = self.slow(tenant, body, long=not on_the_clock)
        op = self._slowed[-1][0]
        if on_the_clock:
            self._moved += lease + PAST_THE_LEASE
            return [*slow, *self._drawn(Clock(seconds=lease + PAST_THE_LEASE,
                                              why="past the lease of the running request"),
                                        Retry(id=op, once_answered=True))]
        return [*slow, *self._drawn(Retry(id=op, once_answered=True))]

    def take_over(self, tenant: str, body: Any) -> list[Action]:
        """A new slowed request, and its retry once its lease has run out while it still runs
        (the story of a lease takeover, drawn as one rule as ``outlive`` is: a slowed request
        and a late retry rarely meet by chance): the retry may take the key over, and the slow
        original must then not commit a second charge.  Past the lease on the clock; where
        only real time passes it, the request is slowed past the lease and the retry waits."""
        on_the_clock = self.target.lease_runs_out_on_the_clock
        return [*self.slow(tenant, body, long=not on_the_clock),
                *self.retry_running(late=True)]

    def _reuse(self, original: _Operation, change: Change, fill: Fill, pick: int,
               variant: tuple[int, int] | None = None) -> Action:
        """Reuse a key the target has surely seen (if the first request was lost on its way,
        the target rightly treats the "reuse" as the first request, and P4 cannot tell), with
        one change where the target allows one (``harness.http._variations``): one field, the
        operation (the same body where the other takes the same fields), the query string
        (where the fingerprint promises to cover it); else another body altogether.  Never on
        a route or method the target did not declare: its answer would prove nothing."""
        endpoint = self.target.endpoint
        fresh = render(endpoint, fill)
        if change == "operation":
            others = self.target.sharing_keys_with(endpoint)
            other = operation_change(self.target, endpoint, original.body,
                                     render(others[pick % len(others)], fill) if others else None,
                                     pick=pick)
            if other is not None:
                label = others[pick % len(others)].label
                return Reuse(id=original.id, change="operation", operation=label,
                             method=other.method, path=other.path, body=other.body)
        if change == "query" and self.target.promises.query_in_fingerprint:
            varied = query_change(endpoint, original.body)
            return Reuse(id=original.id, change="query", path=varied.path, body=varied.body)
        if change in ("field", "query", "operation"):
            fields = fields_to_vary(endpoint)
            field, option = variant if variant is not None else (pick, pick)
            for turn in range(len(fields)):  # the drawn field first, else the next that can
                path = fields[(field + turn) % len(fields)]
                options = field_changes(endpoint, original.body, fresh, [path])
                if options:
                    chosen = options[option % len(options)]
                    return Reuse(id=original.id, change="field", field=".".join(path),
                                 body=chosen.body)
        return Reuse(id=original.id, change="body", body=another_body(original.body, fresh))

    def _plain(self, tenant: str, body: Any) -> tuple[str, KeyPlan]:
        op, plan = self._next_op(), KeyPlan(name=self._next_key(), shape="plain")
        self._operation(op, tenant, plan, body)
        return op, plan

    def burst(self, tenant: str, copies: int, body: Any) -> list[Action]:
        op, plan = self._plain(tenant, body)
        return self._drawn(Burst(id=op, tenant=tenant, key=plan, copies=copies, body=body))

    def burst_again(self, pick: int, copies: int, expired: bool = False) -> list[Action]:
        """An earlier operation's request again, as copies released together; ``expired``,
        once a jump has taken the clock past its retention (the catalog's expired burst, drawn
        as one rule: an old key, a jump past the retention and its copies rarely meet by
        chance).  The key is still in the table then (the cleanup job, if the target has one,
        has not run): a key the job deleted is a new key, which ``burst`` draws.  Without the
        jump where the store that keeps the clock is down."""
        again = BurstAgain(id=self._target_op(pick).id, copies=copies)
        retention = self.target.promises.retention
        if expired and retention is not None and self.target.moves_clock and self.database_up():
            seconds, why = past_the_retention(retention)
            self._moved += seconds
            return self._drawn(Clock(seconds=seconds, why=why, cleanup=False), again)
        return self._drawn(again)

    def overlap(self, tenant: str, body: Any, fraction: float, reuse: bool,
                fill: Fill) -> list[Action]:
        """A new request and, ``fraction`` of the measured latency later, its retry (or the
        key with another body): a second request that meets the original still running on a
        target with no slow hook."""
        op, plan = self._plain(tenant, body)
        after = int(self.latency_ms * fraction)
        other = another_body(body, render(self.target.endpoint, fill)) if reuse else None
        return self._drawn(Overlap(id=op, tenant=tenant, key=plan, body=body, after_ms=after,
                                   second="reuse" if reuse else "retry", other_body=other))

    def after_write(self, tenant: str, write: int, fault: Literal["cut", "kill"],
                    body: Any) -> list[Action]:
        op, plan = self._plain(tenant, body)
        return self._drawn(AfterWriteFault(id=op, tenant=tenant, key=plan, write=write,
                                           fault=fault, body=body))

    def handler_fault(self, tenant: str, fault: str, body: Any) -> list[Action]:
        op, plan = self._plain(tenant, body)
        return self._drawn(HandlerFault(id=op, tenant=tenant, key=plan, fault=fault, body=body))

    def keyless(self, tenant: str, body: Any) -> list[Action]:
        return self._drawn(Keyless(id=self._next_op(), tenant=tenant, body=body))

    def bad_body(self, tenant: str, body: Any, why: str) -> list[Action]:
        """A body the target must refuse, with a fresh key no later step names (P10 judges it
        alone; drawn only while no fault is on, since P10 needs the answer)."""
        plan = KeyPlan(name=self._next_key(), shape="plain")
        self._sketch.make(plan)
        return self._drawn(HostileBody(id=self._next_op(), tenant=tenant, key=plan, body=body,
                                       why=why))

    def toggle(self, fault: str) -> list[Action]:
        """Heal the fault that is on, or else switch ``fault`` on."""
        if self.faults_on:
            return self._drawn(FaultOff(fault=self.faults_on.pop()))
        self.faults_on.append(fault)
        return self._drawn(FaultOn(fault=fault))

    def clock(self, seconds: float, why: str) -> list[Action]:
        self._moved += seconds
        return self._drawn(Clock(seconds=seconds, why=why))

    def crash(self, tenant: str, point: str, body: Any) -> list[Action]:
        op, plan = self._plain(tenant, body)
        return self._drawn(Crash(id=op, tenant=tenant, key=plan, point=point, body=body))

    def slow(self, tenant: str, body: Any, long: bool = False) -> list[Action]:
        """A slowed request; ``long`` ones run past the lease in real time, where only real
        time passes a lease (``real_time_slow_ms``)."""
        op, plan = self._plain(tenant, body)
        ordinary = slow_ms(self.target, self.latency_ms)
        delay = (real_time_slow_ms(self.target) or ordinary) if long else ordinary
        self._slowed.append((op, self._actions, delay))
        return self._drawn(Slow(id=op, tenant=tenant, key=plan, delay_ms=delay, body=body))

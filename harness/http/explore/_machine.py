"""The Hypothesis state machine: rules are the protocol's operations and its faults.

A rule draws values, the planner turns them into an action, the session has the world perform
it; the invariant hands the history so far to the checker.  Rules exist only for what the
target offers (a clock hook, a crash hook, a slow hook), so every drawn story can run.

Hypothesis picks evenly among the rules that may run, and switches a random part of them off
for each example (swarm testing).  An even pick would make a new request as rare as a crash, so
each operation is registered as many times as its weight: a rule registered four times is
picked four times as often, and is hardly ever switched off entirely.  That is what makes the
combinations that matter (a request, a clock jump, then its retry) likely within a budget of a
few dozen examples.  The order of ``WEIGHTS`` says which rule Hypothesis favours (``_rules``).
"""

from __future__ import annotations

from typing import Any, Literal, cast

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant

from harness._front import WHOLE
from harness._target import Target
from harness.explore._opening import Move, Opening
from harness.explore._rules import Operation as _Operation
from harness.explore._rules import rules
from harness.explore._strategies import (
    RECENT_FIRST,
    WHY_JUST_WITHIN_RETENTION,
    WHY_PAST_LEASE,
    WHY_PAST_RETENTION,
)
from harness.http._variations import field_changes, fields_to_vary
from harness.http.explore._actions import Action
from harness.http.explore._bodies import Fill
from harness.http.explore._planner import Planner, can_retry_late, keyless_alone, real_time_slow_ms
from harness.http.explore._session import Session
from harness.http.explore._strategies import (
    OVERLAP_FRACTIONS,
    Again,
    BadBody,
    Draft,
    KeyChoice,
    Strategies,
)

__all__ = ["CLOCK", "RESTARTS", "WEIGHTS", "machine_for", "parts"]

MAX_BURST = 8
#: Copies in the opening's burst: enough to meet a race with a window of a few milliseconds.
OPENING_COPIES = 4
#: The plainest body's values, and another body's, for the opening's stories.
PLAIN, OTHER = Fill(1, "a", ""), Fill(2, "b", "")

#: How often each operation is drawn, relative to the others.  Hypothesis starts from and
#: shrinks towards the operations that draw the fewest values, and among those the first here
#: (``_rules``).  A retry comes first: Hypothesis's simplest example is then a request and its
#: retries, and each of its early examples retries the last operation of a few drawn steps, so
#: a flaw a plain retry shows comes at once; ``bad_body`` comes last (it sorted first by name,
#: and the first examples sent fourteen bodies the target must refuse).
WEIGHTS = {"send_again": 4, "request": 4, "time_passes": 3, "burst": 1, "overlap": 2,
           "burst_again": 1, "slow_request": 2, "retry_while_running": 2, "keyless": 1,
           "crash": 1, "outlive_lease": 1, "take_over": 1, "after_write": 1,
           "handler_error": 1, "toggle_fault": 1, "bad_body": 1}

#: The capability each operation needs from the target, if any.
NEEDS = {"time_passes": "clock", "crash": "crash", "slow_request": "slow",
         "retry_while_running": "slow", "outlive_lease": "slow", "take_over": "slow",
         "handler_error": "handler-error"}


class _Machine(RuleBasedStateMachine):
    """Requests, retries, reuses, bursts, faults, clock jumps and crashes against one target,
    judged by the checker after every step.  ``machine_for`` adds the rules."""

    session: Session
    drawn: Target  # the target as planned for (``drawn_target``)
    operations: frozenset[str]  # the operations it has rules for
    opening: tuple[Opening, ...]  # the stories told before Hypothesis draws (``opening``)

    def __init__(self) -> None:
        super().__init__()
        self.plan = Planner(self.drawn, latency_ms=self.session.latency_ms)
        self.world = self.session.begin()

    def _do(self, actions: list[Action]) -> None:
        for action in actions:
            self.session.act(self.world, action)

    # ---- the operations (registered as rules by ``machine_for``) ---------------------------

    def request(self, draft: Draft) -> None:
        """A new operation, its key plain or an edge case: the longest allowed, another key in
        the other letter case, a long common prefix, the same key in the other tenant, or one
        the target must refuse."""
        self._do(self.plan.request(draft.tenant, draft.key, draft.body))

    def send_again(self, again: Again) -> None:
        """An earlier operation's key again: a retry (its JSON maybe respelled) or a reuse with
        another body, path or method."""
        self._do(self.plan.again(again.pick, again.how, again.fill, variant=again.variant))

    def burst(self, tenant: str, copies: int, body: Any) -> None:
        self._do(self.plan.burst(tenant, copies, body))

    def burst_again(self, pick: int, copies: int, expired: bool) -> None:
        """An earlier operation's key again, as copies released together, maybe once its
        retention has run out: then at most one of them may execute."""
        self._do(self.plan.burst_again(pick, copies, expired))

    def overlap(self, tenant: str, body: Any, fraction: float, reuse: bool, fill: Fill) -> None:
        """A request and its retry (or its key with another body) timed inside the target's
        measured latency: a retry while the original runs, without a slow hook."""
        self._do(self.plan.overlap(tenant, body, fraction, reuse, fill))

    def after_write(self, tenant: str, write: int, fault: Literal["cut", "kill"],
                    body: Any) -> None:
        """A request whose store link is cut, or whose server is killed, right after the
        store commits one of its writes (the store proxy reads them on the wire)."""
        self._do(self.plan.after_write(tenant, write, fault, body))

    def handler_error(self, tenant: str, fault: str, body: Any) -> None:
        """A request whose handler fails the way one of the declared faults makes it."""
        self._do(self.plan.handler_fault(tenant, fault, body))

    def keyless(self, tenant: str, body: Any) -> None:
        self._do(self.plan.keyless(tenant, body))

    def bad_body(self, bad: BadBody) -> None:
        """A request whose body the target must refuse (P10), with a key of its own: never
        the body of an operation a later step retries or reuses."""
        self._do(self.plan.bad_body(bad.tenant, bad.body, bad.why))

    def toggle_fault(self, fault: str) -> None:
        """Switch ``fault`` on, or heal the one that is on: one fault at a time, so faults
        come and go within a story instead of piling up."""
        self._do(self.plan.toggle(fault))

    def time_passes(self, jump: tuple[float, str]) -> None:
        """The target's clock jumps forward."""
        self._do(self.plan.clock(*jump))

    def retry_while_running(self, late: bool) -> None:
        """Retry the slowed request while it still runs: at once (it must get 409 or wait),
        or after the clock has passed its lease (a retry may take the key over, and the slow
        original must then not commit a second charge)."""
        self._do(self.plan.retry_running(late))

    def outlive_lease(self, tenant: str, body: Any) -> None:
        """A slowed request outlives its lease with no one taking the key over; its retry,
        once it has answered, must be answered with the stored response."""
        self._do(self.plan.outlive(tenant, body))

    def take_over(self, tenant: str, body: Any) -> None:
        """A slowed request outlives its lease and its retry, sent while it still runs, may
        take the key over: the original must then not commit a second charge."""
        self._do(self.plan.take_over(tenant, body))

    def crash(self, tenant: str, point: str, body: Any) -> None:
        self._do(self.plan.crash(tenant, point, body))

    def slow_request(self, tenant: str, body: Any, long: bool) -> None:
        self._do(self.plan.slow(tenant, body, long))

    # ---- judging ---------------------------------------------------------------------------

    @invariant()
    def the_checker_finds_nothing(self) -> None:
        self.session.check_step(self.world)

    def teardown(self) -> None:
        self.session.finish(self.world)


def _operations(draw: Strategies, session_latency_ms: int) -> dict[str, _Operation]:
    target = draw.target
    # Keyless charges counted as a difference of totals: the request must run alone.
    keyless_when = (lambda m: m.plan.running() is None) if keyless_alone(target) else None
    expires_on_the_clock = target.moves_clock and target.promises.retention is not None
    operations = {
        "request": _Operation({"draft": draw.drafts}),
        "send_again": _Operation({"again": draw.agains}, lambda m: bool(m.plan.retryable())),
        "time_passes": _Operation({"jump": st.sampled_from(draw.clock_steps)},
                                  lambda m: m.plan.database_up()),
        "burst": _Operation({"tenant": draw.tenants, "copies": st.integers(2, MAX_BURST),
                             "body": draw.bodies}),
        "keyless": _Operation({"tenant": draw.tenants, "body": draw.bodies}, keyless_when),
        "toggle_fault": _Operation({"fault": draw.faults}),
        # A crash must reach the target: no network fault may stand in its way.
        "crash": _Operation({"tenant": draw.tenants, "point": st.sampled_from(draw.crash_points),
                             "body": draw.bodies}, lambda m: not m.plan.faults_on),
        "slow_request": _Operation({"tenant": draw.tenants, "body": draw.ordinary_bodies,
                                    "long": (st.booleans() if real_time_slow_ms(target)
                                             else st.just(False))}),
        "burst_again": _Operation({"pick": st.sampled_from(RECENT_FIRST),
                                   "copies": st.integers(2, MAX_BURST),
                                   "expired": (st.booleans() if expires_on_the_clock
                                               else st.just(False))},
                                  lambda m: bool(m.plan.retryable())),
        "handler_error": _Operation({"tenant": draw.tenants,
                                     "fault": st.sampled_from(draw.handler_faults or ["-"]),
                                     "body": draw.bodies}, lambda m: not m.plan.faults_on),
        # Late only where the lease can run out: on the clock, or a short wait in real time.
        "retry_while_running": _Operation(
            {"late": st.booleans() if can_retry_late(target) else st.just(False)},
            lambda m: m.plan.running() is not None),
    }
    if target.promises.lease is not None and can_retry_late(target):
        # on the clock, its hook needs the database; else the request is slowed past the lease
        operations["outlive_lease"] = _Operation(
            {"tenant": draw.tenants, "body": draw.ordinary_bodies},
            lambda m: m.plan.database_up())
    if target.promises.lease is not None and can_retry_late(target):
        # where only real time passes the lease, each takeover story waits it out, but a long
        # slowed request and a late retry while it runs rarely meet by chance (renewed_lease's
        # no-renewal went unseen for 65 examples at seed 1: no retry came later than 1.6 s)
        operations["take_over"] = _Operation(
            {"tenant": draw.tenants, "body": draw.ordinary_bodies},
            lambda m: m.plan.database_up())
    writes = draw.writes_per_charge
    if writes > 0:  # the store proxy saw an ordinary charge commit this many writes
        faults: list[str] = ["cut", "kill"] if "restart" in target.capabilities() else ["cut"]
        operations["after_write"] = _Operation(
            {"tenant": draw.tenants, "write": st.integers(1, writes),
             "fault": st.sampled_from(faults), "body": draw.bodies},
            lambda m: not m.plan.faults_on)
    if session_latency_ms > 0:  # a second request timed inside an ordinary one's latency
        operations["overlap"] = _Operation({"tenant": draw.tenants, "body": draw.ordinary_bodies,
                                            "fraction": draw.fractions, "reuse": st.booleans(),
                                            "fill": draw.fills})
    if draw.bad_bodies is not None:  # P10 needs the answer: no fault may be on
        operations["bad_body"] = _Operation({"bad": draw.bad_bodies},
                                            lambda m: not m.plan.faults_on)
    return operations


#: The parts of an exploration (``parts``): the whole, or clock jumps and restarts apart.
CLOCK, RESTARTS = "clock", "restarts"


def parts(session: Session) -> tuple[str, ...]:
    """The whole target in one part, or two parts on deployments of their own where a restart
    would leave the clock unknown (a test clock whose fate across a restart nobody declared)
    and the explorer restarts the target: a story that moved the clock and then restarted the
    target could not be judged, so clock jumps are drawn without restarts and restarts
    without clock jumps (each part's deployment starts with its clock unmoved)."""
    keeper = session.deployment.clock_keeper
    if keeper is not None and not keeper.knows_restarts and "restart" in (
            session.target.capabilities()):
        return CLOCK, RESTARTS
    return (WHOLE,)


def drawn_target(session: Session, part: str = WHOLE) -> Target:
    """The target as the explorer plans for it in ``part``: whole; not restartable (so
    neither crashed nor killed) where clock jumps are drawn apart from restarts; without its
    clock where restarts are.  ``session.not_drawn`` says what no story combines."""
    target = session.target
    if part == WHOLE:
        return target
    session.not_drawn["clock"] = (
        "clock jumps and restarts are drawn in two parts, each on a deployment of its own, "
        "never in one story: nothing says where the target's clock stands after a restart "
        "(declare [hooks.clock] read or restart_resets)")
    if part == CLOCK:
        assert target.start is not None  # restartable: the harness starts it
        return target.model_copy(update={"start": target.start.model_copy(
            update={"restartable": False})})
    return target.model_copy(update={"hooks": target.hooks.model_copy(
        update={"clock": None})})


def machine_for(session: Session, part: str = WHOLE) -> type[RuleBasedStateMachine]:
    """The state machine for the session's target in ``part``; each example gets a fresh
    world."""
    target = drawn_target(session, part)
    capabilities = target.capabilities()
    draw = Strategies(target, writes_per_charge=session.writes_per_charge)
    operations = {name: operation
                  for name, operation in _operations(draw, session.latency_ms).items()
                  if NEEDS.get(name, "") in capabilities | {""}}
    namespace: dict[str, Any] = {"session": session, "drawn": target,
                                 "operations": frozenset(operations),
                                 "opening": opening(draw),
                                 **rules(_Machine, operations, WEIGHTS)}
    return cast(type[RuleBasedStateMachine],
                type("IdempotencyMachine", (_Machine,), namespace))


def _reuses_to_tell(draw: Strategies, body: Any) -> tuple[list[Again], list[Again]]:
    """The reuses of the opening, one factor each: the first of each kind (another body; one
    field changed; the same body on another declared operation of the key space; another
    query string where the fingerprint promises to cover it), then the rest (each field
    changed alone to each of its other values, a fresh one and each declared
    ``valid_values`` alternative; each other declared operation)."""
    target = draw.target
    endpoint = target.endpoint
    fresh = draw.body(OTHER)
    fields = [Again(0, "field", OTHER, variant=(number, option))
              for number, path in enumerate(fields_to_vary(endpoint))
              for option in range(len(field_changes(endpoint, body, fresh, [path])))]
    operations = [Again(pick, "operation", OTHER)
                  for pick in range(len(target.sharing_keys_with(endpoint)))]
    query = [Again(0, "query", OTHER)] if target.promises.query_in_fingerprint else []
    first = [Again(0, "body", OTHER), *fields[:1], *operations[:1], *query]
    return first, [*fields[1:], *operations[1:]]


def opening(draw: Strategies) -> tuple[Opening, ...]:
    """The shortest story of each kind (``_opening``), the cheapest and commonest first: a
    retry; the reuses, one factor each (``_reuses_to_tell``); the key from the other tenant;
    copies sent together; a retry inside the original's latency; a retry just within the
    retention; a jump past it (the jump reads the key table); copies of an expired key
    released together (at most one may run: a store that checks the expiry outside the claim
    runs each); a crash at each declared point
    and a retry past the lease (a restart each: split-commit and ack-before-commit show at the
    second point within seconds, where only the takeover's 30 s real-time wait showed them); the
    store link cut right after each write a charge commits (where the store proxy reads them);
    then the rarer ones: every other one-factor reuse, the original's retry after a reuse (a
    store that let the reuse overwrite its answer), each key the declared rules refuse, each
    odd key they accept and its retry, a key and its twin in the other letter case; last, a
    slowed request outliving its lease and a retry that may take its key over (it waits the
    longest).  Each is a story the machine could draw, with the plainest values."""
    target = draw.target
    body = draw.body(PLAIN)
    request = Move("request", {"draft": Draft("a", KeyChoice("plain", 0, ""), body)})
    retry = Move("send_again", {"again": Again(0, "as-sent", PLAIN)})
    jumps = {why: Move("time_passes", {"jump": (seconds, why)})
             for seconds, why in draw.clock_steps}
    first_reuses, more_reuses = _reuses_to_tell(draw, body)
    stories: list[Opening] = [(request, retry)]
    stories += [(request, Move("send_again", {"again": again})) for again in first_reuses]
    if target.tenant is not None:
        stories.append((request, Move("request", {
            "draft": Draft("a", KeyChoice("shared", 0, ""), body)})))
    stories += [
        (Move("burst", {"tenant": "a", "copies": OPENING_COPIES, "body": body}),),
        (Move("overlap", {"tenant": "a", "body": body, "fraction": OVERLAP_FRACTIONS[1],
                          "reuse": False, "fill": PLAIN}),),
    ]
    if WHY_JUST_WITHIN_RETENTION in jumps:
        stories.append((request, jumps[WHY_JUST_WITHIN_RETENTION], retry))
    if WHY_PAST_RETENTION in jumps:
        stories.append((request, jumps[WHY_PAST_RETENTION]))
    if target.moves_clock and target.promises.retention is not None:  # the late burst
        stories.append((request, Move("burst_again", {"pick": 0, "copies": OPENING_COPIES,
                                                      "expired": True})))
    if WHY_PAST_LEASE in jumps:
        stories += [(Move("crash", {"tenant": "a", "point": point, "body": body}),
                     jumps[WHY_PAST_LEASE], retry) for point in draw.crash_points]
    stories += [(Move("after_write", {"tenant": "a", "write": write, "fault": "cut",
                                      "body": body}),)
                for write in range(1, draw.writes_per_charge + 1)]
    stories += [(request, Move("send_again", {"again": again})) for again in more_reuses]
    stories.append((request, Move("send_again", {"again": first_reuses[0]}), retry))
    stories += [(Move("request", {"draft": Draft("a", KeyChoice("hostile", 0, "", kind),
                                                 body)}),)
                for kind in draw.hostile_kinds]
    stories += [(Move("request", {"draft": Draft("a", KeyChoice("odd", 0, "", kind), body)}),
                 retry) for kind in draw.odd_kinds]
    stories.append((request, Move("request", {
        "draft": Draft("a", KeyChoice("case-twin", 0, ""), body)})))
    stories.append((Move("take_over", {"tenant": "a", "body": body}),))
    return tuple(stories)

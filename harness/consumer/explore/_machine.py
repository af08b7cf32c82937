"""The Hypothesis state machine for a queue consumer: what can happen to a queue, as rules.

Rules are what can happen to a queue and its consumers (publishes, copies, republishes, lost
acks, kills, restarts, stalls, faults, clock jumps, poison messages and failing jobs; on Kafka
also a job outliving its poll interval while the group rebalances, and offsets set back),
registered by weight as the HTTP machine's are (``harness.explore._rules``).  Rules exist only
for what the target offers, so every drawn story can run; ``session.not_drawn`` says what was
left out and why.
"""

from __future__ import annotations

from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant

from harness.consumer._target import ConsumerTarget
from harness.consumer.explore._actions import CONSUMER_FAULT_NAMES, ConsumerAction
from harness.consumer.explore._planner import ConsumerPlanner
from harness.consumer.explore._session import ConsumerSession
from harness.explore._opening import Move, Opening
from harness.explore._rules import Operation, rules
from harness.explore._strategies import RECENT_FIRST, WHY_JUST_WITHIN_RETENTION, clock_steps

__all__ = ["NEEDS", "WEIGHTS", "machine_for"]

#: How often each operation is drawn, relative to the others.  Hypothesis starts from and
#: shrinks towards the operations that draw the fewest values, and among those the first here
#: (``_rules``): ``publish``, then the others in the order of their names.
WEIGHTS = {"publish": 4, "publish_losing_confirm": 1, "restart": 2, "send_poison": 1,
           "stall_mid_job": 1, "copies": 2, "kill": 1, "lost_ack": 2, "time_passes": 2,
           "toggle_fault": 1, "work_failure": 1, "late_republish": 2, "republish": 3,
           "rebalance": 1, "rewind": 1}
#: The capabilities each operation needs from the target (harness/consumer/_target.py).
NEEDS: dict[str, frozenset[str]] = {
    "republish": frozenset({"republish"}), "time_passes": frozenset({"clock"}),
    "late_republish": frozenset({"clock", "republish"}),
    "kill": frozenset({"restart"}), "restart": frozenset({"restart"}),
    "stall_mid_job": frozenset({"instances", "pause-before-work"}),
    "send_poison": frozenset({"poison"}), "work_failure": frozenset({"work-failure"}),
    "rebalance": frozenset({"instances", "pause-before-work", "poll-interval"}),
    "rewind": frozenset({"offsets", "restart"}),
}
#: A copy of a job at once, or a republish: up to this many messages.
MAX_COPIES = 4


class _ConsumerMachine(RuleBasedStateMachine):
    """Stories against one consumer, judged by the checker after every step; ``machine_for``
    adds the rules and the opening (``harness.explore._opening``)."""

    session: ConsumerSession
    drawn: ConsumerTarget
    operations: frozenset[str]  # the operations it has rules for
    opening: tuple[Opening, ...]

    def __init__(self) -> None:
        super().__init__()
        self.plan = ConsumerPlanner(self.drawn)
        self.world = self.session.begin()

    def _do(self, actions: list[ConsumerAction]) -> None:
        for action in actions:
            self.session.act(self.world, action)

    def publish(self) -> None:
        self._do(self.plan.publish(lost=False))

    def publish_losing_confirm(self) -> None:
        """A new job whose publisher confirm is lost (each waits a confirm out)."""
        self._do(self.plan.publish(lost=True))

    def copies(self, copies: int) -> None:
        self._do(self.plan.copies(copies))

    def republish(self, pick: int, copies: int) -> None:
        self._do(self.plan.republish(pick, copies))

    def lost_ack(self, then: str) -> None:
        self._do(self.plan.lost_ack(then))

    def time_passes(self, jump: tuple[float, str]) -> None:
        self._do(self.plan.clock(*jump))

    def late_republish(self, jump: tuple[float, str], pick: int) -> None:
        """late-redelivery's move: the clock jumps, then an earlier job's key comes back (a
        message parked in a retry queue, replayed from a dead-letter queue)."""
        self._do(self.plan.clock(*jump) + self.plan.republish(pick, 1))

    def restart(self) -> None:
        self._do(self.plan.restart())

    def kill(self, mid_job: bool) -> None:
        self._do(self.plan.kill(mid_job))

    def stall_mid_job(self) -> None:
        self._do(self.plan.stall_mid_job())

    def toggle_fault(self, fault: str) -> None:
        self._do(self.plan.toggle(fault))

    def send_poison(self) -> None:
        self._do(self.plan.poison())

    def work_failure(self, failure: str) -> None:
        self._do(self.plan.work_failure(failure))

    def rebalance(self) -> None:
        """rebalance-while-working's move: a job outlives its poll interval while the other
        member takes its partition."""
        self._do(self.plan.rebalance())

    def rewind(self, pick: int) -> None:
        """offset-reset's move: the group's offsets set back to an earlier job's message."""
        self._do(self.plan.rewind(pick))

    @invariant()
    def the_checker_finds_nothing(self) -> None:
        self.session.check_step(self.world)

    def teardown(self) -> None:
        self.session.finish(self.world)


def _failures(target: ConsumerTarget) -> list[str]:
    """The declared work failures a story may draw: one that fails every delivery only when
    the consumer promises to give up (else it would be retried for ever)."""
    promises = target.promises
    gives_up = promises.on_failure == "dead-letter" or promises.max_attempts is not None
    return [f.name for f in target.hooks.work_failures if f.deliveries == "first" or gives_up]


def _quiet(machine: _ConsumerMachine) -> bool:
    """No fault on and every consumer up: a fault can meet a job where it means to."""
    return machine.plan.quiet()


def _operations(session: ConsumerSession) -> dict[str, Operation]:
    target = session.target
    capabilities = target.capabilities()
    mid_job = "pause-before-work" in capabilities
    restartable = "restart" in capabilities
    jumps = st.sampled_from(clock_steps(lease=target.promises.lease,
                                        retention=target.promises.dedup_window))
    operations = {
        "publish": Operation({}),
        "publish_losing_confirm": Operation({}, _quiet),
        "copies": Operation({"copies": st.integers(2, MAX_COPIES)}),
        "republish": Operation({"pick": st.sampled_from(RECENT_FIRST),
                                "copies": st.sampled_from((1, 1, 2, MAX_COPIES))},
                               lambda m: bool(m.plan.jobs)),
        "lost_ack": Operation({"then": st.sampled_from(["cut", "kill"] if restartable
                                                       else ["cut"])}, _quiet),
        # A jump only while the consumers can handle every job first (``ConsumerWorld``).
        "time_passes": Operation({"jump": jumps}, _quiet),
        "late_republish": Operation({"jump": jumps, "pick": st.sampled_from(RECENT_FIRST)},
                                    lambda m: bool(m.plan.jobs) and m.plan.quiet()),
        "restart": Operation({}, lambda m: m.plan.down),
        "kill": Operation({"mid_job": st.booleans() if mid_job else st.just(False)}, _quiet),
        "stall_mid_job": Operation({}, _quiet),
        "toggle_fault": Operation({"fault": st.sampled_from(CONSUMER_FAULT_NAMES)},
                                  lambda m: not m.plan.down),
        "send_poison": Operation({}),
        "work_failure": Operation({"failure": st.sampled_from(_failures(target) or ["-"])}),
        "rebalance": Operation({}, _quiet),
        "rewind": Operation({"pick": st.sampled_from(RECENT_FIRST)},
                            lambda m: bool(m.plan.jobs) and m.plan.quiet()),
    }
    if not mid_job:
        session.not_drawn["kill-mid-job"] = (
            "a kill in the middle of a job is not drawn: the consumer has no pause hook before "
            "its work ([hooks.pause] before-work), so a kill cannot be shown to meet a job")
    if target.hooks.events is None:
        operations.pop("stall_mid_job")
        session.not_drawn["stall-mid-job"] = (
            "a stall in the middle of a job is not drawn: without an events feed the harness "
            "cannot tell which consumer holds the job")
        operations.pop("rebalance")
        operations.pop("rewind")  # a message read again cannot be seen without a feed
    if not {"ack-hold", "pause-before-ack"} & capabilities:
        operations.pop("lost_ack")
        session.not_drawn["lost-ack"] = (
            "a lost ack is not drawn: on this broker holding what the consumer sends holds "
            "more than its ack, and the consumer has no pause hook after its work "
            "([hooks.pause] before-commit)")
    if session.deployment.clock is None:
        operations.pop("time_passes")
        operations.pop("late_republish")
        if "clock" in capabilities and session.deployment.clock_unconfirmed:
            session.not_drawn["clock"] = session.deployment.clock_unconfirmed
    if not _failures(target):
        operations.pop("work_failure")
    return {name: operation for name, operation in operations.items()
            if NEEDS.get(name, frozenset()) <= capabilities}


def _opening(target: ConsumerTarget) -> tuple[Opening, ...]:
    """The shortest story of each kind, the cheapest and commonest first: a job republished
    under a new message id; copies at once; a job republished just within the dedup window; a
    job whose work fails once; a lost ack; a kill in the middle of a job; a poison message.
    Each is a story the machine could draw, told only where it has the story's operations."""
    publish = Move("publish")
    stories: list[Opening] = [
        (publish, Move("republish", {"pick": 0, "copies": 1})),
        (Move("copies", {"copies": MAX_COPIES}),),
    ]
    jumps = {why: seconds for seconds, why in clock_steps(
        lease=target.promises.lease, retention=target.promises.dedup_window)}
    if WHY_JUST_WITHIN_RETENTION in jumps:
        jump = (jumps[WHY_JUST_WITHIN_RETENTION], WHY_JUST_WITHIN_RETENTION)
        stories.append((publish, Move("late_republish", {"jump": jump, "pick": 0})))
    failures = _failures(target)
    if failures:
        stories.append((Move("work_failure", {"failure": failures[0]}),))
    stories.append((Move("lost_ack", {"then": "cut"}),))
    if "pause-before-work" in target.capabilities():
        stories.append((Move("kill", {"mid_job": True}),))
    stories.append((Move("send_poison"),))
    # a broker's own stories (the machine tells only those it has rules for): Kafka's zombie,
    # and a restart at an old offset
    stories.append((Move("rebalance"),))
    stories.append((publish, Move("rewind", {"pick": 0})))
    return tuple(stories)


def machine_for(session: ConsumerSession) -> type[RuleBasedStateMachine]:
    """The state machine for the session's consumer; each example gets a fresh world."""
    operations = _operations(session)
    namespace: dict[str, Any] = {"session": session, "drawn": session.target,
                                 "operations": frozenset(operations),
                                 "opening": _opening(session.target),
                                 **rules(_ConsumerMachine, operations, WEIGHTS)}
    return cast(type[RuleBasedStateMachine],
                type("ConsumerMachine", (_ConsumerMachine,), namespace))



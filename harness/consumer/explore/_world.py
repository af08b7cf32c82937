"""One consumer example's world: fresh keys, its own history, and the steps taken so far.

On the deployment every example shares.

The world performs actions through the scenarios' ``ConsumerContext`` (publisher confirms, the
consumer nemesis, the events feed, the effects oracle), so every publish, fault, kill and clock
jump lands in the history.  A step that means to meet a job at a moment (a kill while the job
is held, acks held while it commits, copies in two consumers' hands at once) records what it
meant (``intend``) and what it saw (``observe``) as the scenarios do, and the checker weighs one
against the other (harness/consumer/_preconditions.py): a step whose moment was not shown
leaves its key unknown, never a finding.  Each step then waits, bounded, until the jobs it made
are done (as an HTTP request is answered before the next step), so a story replays the same way.
It never judges: ``judge`` only hands the history to the checker.  ``settle`` ends a story with
the queue drained: faults healed, consumers restarted, nothing open for any key.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import replace

from harness._errors import HarnessError
from harness._history import ORACLE, Event, History
from harness._target import LEASE_SLACK, REAL_LEASE_LIMIT
from harness.consumer._context import QUIET, SETTLE, ConsumerContext
from harness.consumer._deployment import ConsumerDeployment
from harness.consumer._properties import QUEUE_PROPERTIES
from harness.consumer.explore._actions import (
    ConsumerAction,
    Copies,
    FailingJob,
    Kill,
    LostAck,
    Poison,
    Publish,
    Rebalance,
    Republish,
    Restart,
    Rewind,
    StallMidJob,
    kind_of,
)
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._failure import Failure
from harness.explore._keys import KeyPlan
from harness.explore._scenario import EXPLORER
from harness.explore._steps import StepRecord
from harness.judging._analysis import Identity, View
from harness.judging._checker import CheckOptions, CheckResult, check_history
from harness.judging._findings import Finding

__all__ = ["KILL_PAUSE_MS", "STEP_WAIT", "ConsumerWorld"]

#: Seconds a step waits for the jobs it made to be done before the next step.
STEP_WAIT = 5.0
#: A job killed in the middle pauses this long before its work: the kill lands inside it.
KILL_PAUSE_MS = 3_000
#: The shortest pause of a job whose consumer is stalled in the middle (redelivered-while-
#: working's): the broker must drop the stalled consumer while the job still runs.
MIN_STALL_PAUSE_MS = 8_000
#: Where holding what a consumer sends would hold more than its ack (Kafka), a lost ack's job
#: pauses this long after its work, and the cut or kill lands in the pause.
COMMIT_PAUSE_MS = 1_500
#: How much longer than the poll interval a rebalance's job pauses (rebalance-while-working's).
OUTLIVE_BY = 3.0
#: On a broker that settles by offsets, how long a kill in the middle of a job waits for the
#: consumer's offset to pass the record first (an auto-commit timer commits while the job
#: waits), as consumer-crash does.
COMMITTED_WAIT = 1.0


class ConsumerWorld:
    """Performs one consumer story's actions against a running deployment and records them."""

    def __init__(self, deployment: ConsumerDeployment, *, retry_horizon: float,
                 consumers: int) -> None:
        self.deployment = deployment
        self.target = deployment.target
        self.options = CheckOptions.for_target(self.target, retry_horizon)
        self.history = History()
        self.context = ConsumerContext(scenario_name=EXPLORER.name, deployment=deployment,
                                       history=self.history,
                                       rng=random.Random(uuid.uuid4().int))
        self.steps: list[StepRecord[ConsumerAction]] = []
        #: Once set, nothing more happens in this world.
        self.failure: Failure[ConsumerAction] | None = None
        self.doubted: list[Finding] = []
        self._keys: dict[str, str] = {}  # a key's name in the story -> the key sent
        self._jobs: dict[str, str] = {}  # an operation -> its key's name
        self._faults_on: dict[str, list[int]] = {}  # a fault on -> the consumers it acts on
        self._down: list[int] = []  # consumers a kill left down
        self._extra = 0.0  # seconds the drain must allow for a dead consumer's claim
        self._drained = False
        self._restart_down()
        self.context.notice_exits()
        self.context.ensure_consumers(consumers)
        self._watches_storage = bool(self.target.hooks.store_size
                                     and self.deployment.clock is not None)
        self._rows_before = self._table_rows() if self._watches_storage else 0

    # ---- acting ----------------------------------------------------------------------------

    def step(self, action: ConsumerAction) -> StepRecord[ConsumerAction]:
        """Perform one drawn action and record it as the story's next step."""
        number = sum(1 for s in self.steps if not s.settle) + 1
        return self._record(action, number, settle=False)

    def _record(self, action: ConsumerAction, number: int, *,
                settle: bool) -> StepRecord[ConsumerAction]:
        record: StepRecord[ConsumerAction] = StepRecord(
            number, kind_of(action), action.text(), action, settle=settle,
            first_event=len(self.history))
        self.steps.append(record)
        response, key = self._perform(action)
        self.context.notice_exits()
        record.response = response
        record.identity = (None, key) if key is not None else None
        record.last_event = len(self.history)
        return record

    def _perform(self, action: ConsumerAction) -> tuple[str | None, str | None]:
        ctx = self.context
        match action:
            case Publish():
                key = self._new_job(action.id, action.key)
                if action.confirm == "lost":  # as republish-after-lost-confirm does
                    ctx.intend("first-publish-queued", key, ("P1",))
                    published = ctx.publish_losing_confirm(key)
                    text = self._then(self._confirms([published]), [key])
                    ctx.observe(key)  # what shows the message arrived, without a feed
                    return text, key
                published = ctx.publish(key)
                return self._then(self._confirms([published]), [key]), key
            case Copies():
                key = self._new_job(action.id, action.key)
                return self._copies(key, action.copies), key
            case Republish():
                key = self._keys[self._jobs[action.id]]
                attempt = self._attempts(key) + 1
                if action.copies == 1:
                    sent = [ctx.publish(key, label="republish", attempt=attempt,
                                        encoding=attempt)]
                else:
                    sent = ctx.publish_copies(key, action.copies, label="republish")
                return self._then(self._confirms(sent), [key]), key
            case Poison():
                key = self._new_job(action.id, action.key)
                published = ctx.publish(key, label="poison", poison=True)
                return self._then(self._confirms([published]), [key]), key
            case FailingJob():
                key = self._new_job(action.id, action.key)
                failure = next(f for f in self.target.hooks.work_failures
                               if f.name == action.failure)
                label = (f"fails-once:{failure.when}" if failure.deliveries == "first"
                         else "fails-always")
                published = ctx.publish(key, label=label,
                                        failure=(failure.when, failure.deliveries))
                return self._then(self._confirms([published]), [key],
                                  longer=self._retries()), key
            case LostAck():
                key = self._new_job(action.id, action.key)
                return self._lost_ack(key, action.then), key
            case Kill() if action.id is not None and action.key is not None:
                key = self._new_job(action.id, action.key)
                return self._kill_mid_job(key), key
            case Kill():
                killed = self._running()
                for number in killed:
                    ctx.kill(number)
                self._down += killed
                return f"consumers {_listing(killed)} killed; down until a restart", None
            case Restart():
                return self._restart_down(), None
            case StallMidJob():
                key = self._new_job(action.id, action.key)
                return self._stall_mid_job(key), key
            case Rebalance():
                key = self._new_job(action.id, action.key)
                return self._rebalance(key), key
            case Rewind():
                key = self._keys[self._jobs[action.id]]
                return self._rewind(key), key
            case FaultOn():
                on = self._running()
                for number in on:
                    ctx.nemesis.inject(action.fault, number)
                self._faults_on[action.fault] = on
                self._extra = max(self._extra, self._lease_in_real_time())
                return f"on the connections of consumers {_listing(on)}", None
            case FaultOff():
                return self._heal(action.fault), None
            case Clock():
                still = self._open_jobs()
                if still:
                    return (f"clock not moved: {still} job(s) of the story not done (a message "
                            "still queued would meet the moved clock, and its dedup window "
                            "could not be judged)"), None
                return self._advance_clock(action.seconds, observe=not self._drained), None
        raise AssertionError(f"unhandled action {action!r}")

    def _lease_in_real_time(self) -> float:
        """What the drain allows after a consumer's connection was cut or stalled: a job under
        way then (one a slow machine had not finished) may have left a claim, and its
        redelivery rightly waits for the lease (faststream_redis's drain gave up 15 s into a
        30 s lease: unknown).  In real time, up to ``REAL_LEASE_LIMIT``: the clock is not
        moved past the lease, since that job may still be running."""
        lease = self.target.promises.lease
        return lease + LEASE_SLACK if lease is not None and lease <= REAL_LEASE_LIMIT else 0.0

    def _new_job(self, name: str, plan: KeyPlan) -> str:
        key = self.context.new_key()
        self._keys[plan.name] = key
        self._jobs[name] = plan.name
        return key

    def _attempts(self, key: str) -> int:
        return sum(1 for e in self.history.events()
                   if e.f == "publish" and e.type == "invoke" and e.key == key)

    def _running(self) -> list[int]:
        return [i.number for i in self.deployment.instances if i.process.running()]

    def _retries(self) -> float:
        """How long the promised retries of a failing job may take."""
        promises = self.target.promises
        return (promises.retry_delay or 0.0) * (promises.max_attempts or 1)

    @staticmethod
    def _confirms(events: Sequence[Event]) -> str:
        counts = Counter({"ok": "confirmed", "fail": "refused", "info": "no confirm"}[e.type]
                         for e in events)
        return ", ".join(f"{what}" + (f" x{n}" if n > 1 else "") for what, n in counts.items())

    def _then(self, text: str, keys: Sequence[str], *, longer: float = 0.0) -> str:
        """``text``, and whether the jobs of ``keys`` were done before the next step."""
        waited = self._await(keys, longer=longer)
        return f"{text}; {waited}" if waited else text

    def _await(self, keys: Sequence[str], *, longer: float = 0.0) -> str:
        """Wait (bounded) until the jobs of ``keys`` are done: with an events feed, each of
        their messages acked or dead-lettered for good and no live consumer holding one;
        without one, an effect counted for each job that may have one.  Not while a fault or
        a kill keeps the consumers from the queue: the job waits for the story."""
        if self._faults_on or self._down:
            return "left to the story (the consumers cannot reach the queue now)"
        started = time.monotonic()
        done = self.context.until(lambda: self._done(keys),
                                  STEP_WAIT + longer + self._paused_for())
        seconds = time.monotonic() - started
        return (f"done in {seconds:.1f} s" if done
                else f"not done after {seconds:.1f} s (the drain waits for it)")

    def _paused_for(self) -> float:
        return max(0.0, self.context.busy_until - time.monotonic())

    def _done(self, keys: Sequence[str]) -> bool:
        events = self.history.events()
        feed = self.context.feed
        if feed is not None:
            confirmed = Counter(e.key for e in events if e.f == "publish" and e.type == "ok"
                                and e.key in keys)
            return not self.deployment.broker.unsettled(
                events, {k: confirmed[k] for k in keys}, feed.live())
        rejected = self._rejected(events)
        return all((self.context.effects_of(k) or 0) >= 1 for k in keys if k not in rejected)

    @staticmethod
    def _rejected(events: Iterable[Event]) -> set[str]:
        """Keys that may never have an effect: poison messages, jobs failing every time."""
        return {e.key for e in events if e.f == "publish" and e.type == "invoke"
                and e.key is not None and (e.value.get("poison") or (
                    e.value.get("fails") or {}).get("deliveries") == "every")}

    def _open_jobs(self) -> int:
        """How many of the story's jobs are not done, after waiting (bounded) for them: the
        checker counts a key's dedup windows from when its messages were published, so a
        clock jump is fair only once every message published before it has been handled.
        With an events feed that is each message settled; without one, an effect for every
        job that may have one and nothing ready, then effects and the queue unchanged for a
        quiet interval (a republished copy may sit unacked in a consumer's prefetch)."""
        keys = sorted({e.key for e in self.history.events()
                       if e.f == "publish" and e.type == "invoke" and e.key is not None})
        ctx = self.context
        broker = self.deployment.broker
        rejected = self._rejected(self.history.events())

        def done() -> bool:
            return self._done(keys) and (ctx.feed is not None or broker.state().ready == 0)

        if not ctx.until(done, STEP_WAIT + self._paused_for()):
            return sum(1 for k in keys if not self._done([k]))
        if ctx.feed is not None:
            return 0
        before = {k: ctx.effects_of(k) for k in keys if k not in rejected}
        time.sleep(QUIET)
        steady = done() and before == {k: ctx.effects_of(k) for k in before}
        return 0 if steady else 1

    def _copies(self, key: str, copies: int) -> str:
        """The copies at once, each pausing briefly before its work where the consumer can,
        so that two consumers hold copies together; meant to overlap (``copies-overlapped``)
        only when two consumers run and nothing keeps them from the queue."""
        ctx = self.context
        overlap = len(self._running()) >= 2 and not self._faults_on and not self._down
        pause = ctx.copies_pause(measure=overlap)  # as burst-of-copies pauses them
        if overlap:
            ctx.intend("copies-overlapped", key, ("P1",), copies=copies)
        sent = ctx.publish_copies(key, copies, pause=pause)
        if overlap:
            # Without a feed the overlap shows as copies taken (at most copies - 2 left ready)
            # while nothing committed: look once the consumers have taken them, inside the
            # pause, rather than the instant the broker confirmed them.
            broker = self.deployment.broker
            ctx.until(lambda: broker.state().ready <= copies - 2,
                      pause[1] / 2000 if pause else 0.0)
            ctx.observe(key)
        return self._then(self._confirms(sent), [key])

    def _lost_ack(self, key: str, then: str) -> str:
        """lost-ack (``cut``) or consumer-crash's first half (``kill``): every consumer's acks
        held, the job committed, then every consumer cut off (or killed and restarted).  Where
        holding what a consumer sends would hold more than its acks (Kafka), the job pauses
        after its work instead and the consumer holding it is cut off or killed in the pause."""
        ctx = self.context
        if "ack-hold" not in self.target.capabilities():
            return self._commit_lost(key, then)
        running = self._running()
        for number in running:
            ctx.nemesis.inject("ack-held", number)
        ctx.publish(key, label="lost-ack" if then == "cut" else "crash:after-work")
        committed = ctx.wait_for_effect(key, timeout=STEP_WAIT)
        ctx.intend("work-done-ack-held", key, ("P1", "P9"), instance=running[0],
                   incident=then)
        ctx.observe(key)
        for number in running:
            if then == "cut":
                ctx.nemesis.inject("connection-cut", number)
            else:
                ctx.kill(number)
        for number in running:
            ctx.nemesis.heal("ack-held", number)
            if then == "cut":
                ctx.nemesis.heal("connection-cut", number)
            else:
                ctx.restart(number)
        self.deployment.wait_for_consumers(len(running))
        # A job another key's message had started when its consumer was cut off (or killed)
        # may have left a claim: its redelivery rightly waits for the lease to run out.
        self._extra = max(self._extra, ctx.pass_lease())
        what = "committed" if committed else "not seen committed"
        incident = "cut off" if then == "cut" else "killed and restarted"
        return self._then(f"{what} with its acks held; consumers {_listing(running)} "
                          f"{incident}", [key])

    def _commit_lost(self, key: str, then: str) -> str:
        """lost-ack on a broker that settles by offsets: the job paused after its work, its
        consumer cut off until the broker has dropped it (or killed and restarted), so the
        commit it owes is refused and the message read again."""
        ctx = self.context
        label = "lost-ack" if then == "cut" else "crash:after-work"
        ctx.publish(key, label=label, pause=("before-ack", COMMIT_PAUSE_MS))
        if ctx.feed is not None:
            ctx.wait_for_delivery(key, paused=True, timeout=STEP_WAIT)
        else:
            ctx.wait_for_effect(key, timeout=STEP_WAIT)
        holder = self._holders(key)[0]
        ctx.intend("work-done-commit-pending", key, ("P1", "P9"), instance=holder,
                   incident=then)
        ctx.observe(key)
        if then == "cut":
            with ctx.fault("connection-cut", holder):
                ctx.wait_until_dropped(holder, timeout=3 * self.target.broker.heartbeat + 10)
        else:
            ctx.kill(holder)
            ctx.restart(holder)
        self.deployment.wait_for_consumers(len(self._running()), timeout=SETTLE)
        incident = "cut off until dropped" if then == "cut" else "killed and restarted"
        return self._then(f"paused after its work; consumer {holder} {incident}", [key])

    def _rebalance(self, key: str) -> str:
        """rebalance-while-working: the job paused in its work past the poll interval, while
        the other member is up: the group hands the partition over, and the other member reads
        the record again while the first still works."""
        ctx = self.context
        poll = self.target.broker.max_poll_interval or 0.0
        pause = int((poll + OUTLIVE_BY) * 1000)
        ctx.publish(key, pause=("before-work", pause))
        ctx.wait_for_delivery(key, paused=True, timeout=STEP_WAIT)
        holder = self._holders(key)[0]
        ctx.intend("copy-while-working", key, ("P1", "P9"), instance=holder,
                   pause_seconds=pause / 1000)
        with ctx.nemesis.outliving("poll-interval-outlived", holder):
            ctx.wait_for_delivery(key, times=2, timeout=pause / 1000)
            ctx.observe(key)
            ctx.wait_for_effect(key, timeout=pause / 1000 + 10)
        try:  # the first polls again after its job, and rejoins
            self.deployment.wait_for_consumers(len(self._running()), timeout=SETTLE)
        except HarnessError as exc:
            return self._then(f"consumer {holder} outlived its poll interval in the job; {exc}",
                              [key])
        return self._then(f"consumer {holder} outlived its poll interval in the job", [key])

    def _rewind(self, key: str) -> str:
        """offset-reset: every consumer stopped, the group's offsets set back to ``key``'s
        message, the consumers started again: every message since is read again."""
        ctx = self.context
        place = ctx.place_of(key)
        ctx.intend("read-again", key, ("P1",))
        running = self._running()
        for number in running:
            self.deployment.stop(number)
        ctx.nemesis.rewind({place[0]: place[1]} if place is not None else None)
        for number in running:
            ctx.start_member(number)
        ctx.wait_for_delivery(key, times=2, timeout=STEP_WAIT)
        return self._then(f"consumers {_listing(running)} restarted at the message's offset",
                          [key])

    def _holders(self, key: str) -> list[int]:
        """The consumers that may hold ``key``'s message: the one that reported pausing in it
        (an events feed), else every running one."""
        reported = [e.process for e in self.history.events()
                    if e.f in ("pause", "deliver") and e.key == key]
        if reported and reported[-1].startswith("consumer-"):
            return [int(reported[-1].removeprefix("consumer-"))]
        return self._running()

    def _kill_mid_job(self, key: str) -> str:
        """consumer-crash's second half: the job paused before its work, the consumer holding
        it killed (every one, when it cannot be told which), restarted, and the dead
        consumer's claim let run out (the clock moved past the lease, or real time allowed
        for in the drain)."""
        ctx = self.context
        ctx.publish(key, label="crash:before-work", pause=("before-work", KILL_PAUSE_MS))
        # the pause starts when the consumer takes the job: a feed says when it does (a member
        # just restarted may take seconds to rejoin and read); without one, the kill is timed
        # inside the pause from the publish
        ctx.wait_for_delivery(key, paused=True, timeout=SETTLE if ctx.feed is not None
                              else KILL_PAUSE_MS / 2000)
        if "offsets" in self.target.capabilities():  # an auto-commit timer may pass it now
            ctx.until(lambda: ctx.committed_past(key), COMMITTED_WAIT)
        holders = self._holders(key)
        ctx.intend("killed-mid-job", key, ("P2", "P9"), instance=holders[0])
        ctx.observe(key)
        for number in holders:
            ctx.kill(number)
        for number in holders:
            ctx.restart(number)
        extra = ctx.pass_lease()
        self._extra = max(self._extra, extra)
        text = f"consumers {_listing(holders)} killed in the job and restarted"
        if extra:
            return f"{text}; the dead consumer's claim runs out in real time (the drain waits)"
        return self._then(text, [key])

    def _stall_mid_job(self, key: str) -> str:
        """redelivered-while-working: the job paused before its work, its consumer stalled
        until the broker drops it (cut if it does not), the other consumer gets the message
        while the first still works."""
        ctx = self.context
        heartbeat = self.target.broker.heartbeat
        pause = max(MIN_STALL_PAUSE_MS, int((3 * heartbeat + 4) * 1000))
        ctx.publish(key, pause=("before-work", pause))
        ctx.wait_for_delivery(key, paused=True, timeout=pause / 4000)
        holder = self._holders(key)[0]
        cut = False
        with ctx.fault("connection-stall", holder):
            if not ctx.wait_until_dropped(holder, timeout=min(3 * heartbeat + 5, pause / 2000)):
                ctx.nemesis.inject("connection-cut", holder)
                cut = True
            ctx.intend("copy-while-working", key, ("P1", "P9"), instance=holder,
                       pause_seconds=pause / 1000)
            ctx.wait_for_delivery(key, times=2, timeout=pause / 4000)
            ctx.observe(key)
            ctx.wait_for_effect(key, timeout=pause / 1000 + 10)
        if cut:
            ctx.nemesis.heal("connection-cut", holder)
        self.deployment.wait_for_consumers(len(self._running()))
        return self._then(f"consumer {holder} stalled in the job"
                          + (" and cut off" if cut else ", dropped by the broker"), [key])

    def _heal(self, fault: str) -> str:
        for number in self._faults_on.pop(fault):
            self.context.nemesis.heal(fault, number)
        try:
            self.deployment.wait_for_consumers(len(self._running()), timeout=SETTLE)
        except HarnessError as exc:
            return f"healed; {exc}"
        return "healed; the consumers are back"

    def _restart_down(self) -> str:
        """Start every consumer a kill left down (or that is down at the start of a story)."""
        down = sorted(set(self._down) | {i.number for i in self.deployment.instances
                                          if not i.process.running()})
        for number in down:
            self.context.restart(number)
        self._down = []
        return f"consumers {_listing(down)} started again" if down else "nothing was down"

    def _advance_clock(self, seconds: float, *, observe: bool) -> str | None:
        """Move the consumer's clock, run its cleanup, and read its dedup table: the evidence
        for P11, counted as the rows this story added (the table is shared by every example)."""
        self.context.advance_clock(seconds)
        if self.target.hooks.cleanup is not None:
            self.deployment.cleanup()
        if not self._watches_storage or not observe:
            return None
        rows = self._table_rows()
        added = max(0, rows - self._rows_before)
        self.history.record("ok", "store-size", ORACLE,
                            value={"rows": added, "table_rows": rows,
                                   "rows_before_story": self._rows_before})
        return f"dedup table: {added} row(s) from this story"

    def _table_rows(self) -> int:
        return self.deployment.store_size()["rows"]

    # ---- observing and judging -------------------------------------------------------------

    def observe(self, *, every_key: bool = False) -> tuple[Event, ...]:
        """Read the consumers' feeds and count every key's effects (a consumer works in the
        background: any key may have changed), and note on each step how many its key has."""
        if self.context.feed is not None:
            self.context.feed.poll()
        self.context.collect_effects()
        events = self.history.events()
        latest: dict[Identity, int] = {}
        for event in events:
            if event.f == "effects" and event.type == "ok":
                latest[(None, event.key)] = int(event.value.get("count", 0))
        for record in self.steps:
            if record.effects is None and record.identity is not None:
                record.effects = latest.get(record.identity)
        return events

    def judge(self, events: Sequence[Event],
              properties: Sequence[str] | None = None) -> CheckResult:
        """The checker's verdict on ``events`` (all properties unless told), with the queue
        account of the story so far beside it."""
        result = check_history(events, self.options, properties=properties)
        if result.summary:
            return result
        return replace(result, summary=QUEUE_PROPERTIES.summary(View(events), self.options))

    # ---- ending ----------------------------------------------------------------------------

    def settle(self) -> None:
        """End the story with the queue drained: heal every fault, start every consumer a
        kill left down, then drain (issue 25's settling: wait until nothing is open for any
        key, allowing for a dead consumer's claim and the promised retries)."""
        for fault in list(self._faults_on):
            self._record(FaultOff(fault=fault), len(self.steps) + 1, settle=True)
        if self._down:
            self._record(Restart(), len(self.steps) + 1, settle=True)
        record: StepRecord[ConsumerAction] = StepRecord(
            len(self.steps) + 1, "drain", "state.drain()", None, settle=True,
            first_event=len(self.history))
        self.steps.append(record)
        self.context.drain(timeout=SETTLE + self._extra + self._retries())
        self._drained = True
        record.last_event = len(self.history)
        drain = next((e for e in reversed(self.history.events()) if e.f == "drain"), None)
        if drain is not None:
            value = drain.value
            record.response = (f"{'settled' if value.get('settled') else 'not settled'} after "
                               f"{float(value.get('waited', 0)):.1f} s; {value.get('left', 0)} "
                               f"left in the queue, {value.get('dead_lettered', 0)} "
                               "dead-lettered")

    def close(self) -> None:
        """Leave the deployment as the next example needs it: no fault, every consumer up,
        and (after a story that failed before it settled) the queue drained."""
        self.context.nemesis.heal_all()
        with suppress(HarnessError):
            self._restart_down()
            if not self._drained:
                self.context.drain(timeout=STEP_WAIT)


def _listing(numbers: Sequence[int]) -> str:
    return ", ".join(str(n) for n in numbers) or "(none)"

"""What a consumer scenario may do, each step recorded in the history.

Publish (confirmed), wait for broker or consumer facts, fault the consumer's connection, kill and
restart it, move its clock, and drain the queue at the end so the checker knows what became of
every message.

Scenarios synchronise on facts, never on sleeps: an effect the oracle counts, a consumer the
broker stops counting, a delivery the consumer reports, the queue emptied.  Every wait is
bounded, and a wait that runs out is recorded, so the checker says "unknown" rather than guess.
A scenario also records what it *meant* to happen (``intend``) and what it saw just before
acting (``observe``): the checker decides from those whether the fault met the job as meant
(harness/consumer/_preconditions.py), and a pass that tested nothing is no pass.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from harness._history import NEMESIS, ORACLE, Event, History
from harness._target import LEASE_SLACK, REAL_LEASE_LIMIT, render_template
from harness.consumer._broker import Published, Publisher, Received
from harness.consumer._deployment import ConsumerDeployment
from harness.consumer._events import EventFeed
from harness.consumer._messages import ENCODINGS, Hook, MessageParts, compose, header_text
from harness.consumer._nemesis import ConsumerNemesis
from harness.evidence._oracle import record_effects

__all__ = ["COPIES_PAUSE_LATENCIES", "COPIES_PAUSE_MS", "PRODUCER", "QUIET", "SETTLE",
           "ConsumerContext", "until_still"]

PRODUCER = "producer"
#: Seconds a scenario waits for the consumer to do what any consumer does in milliseconds.
SETTLE = 15.0
POLL = 0.03
#: Seconds a consumer without an events feed must stay settled before the queue counts as
#: drained (it cannot say what it is still working on); three job latencies when longer.
QUIET = 1.0
#: How many times ``SETTLE`` a drain may wait in all while the work still moves (a message
#: dead-lettered, an effect counted): a loaded machine runs a retry policy's attempts slowly,
#: and a drain cut short by the clock is no evidence that a message loops.
DRAIN_PATIENCE = 4
#: Publishes the latency measurement takes (their median is the job's latency).
LATENCY_SAMPLES = 3
#: Copies of a job pause this long before their work (where the consumer can), so that two
#: consumers hold copies at once, and the harness sees it before either commits; or this many
#: job latencies, when longer.  On a slow machine, with half a second, the second consumer took
#: its copy, or the harness looked, after the first job had committed (unknown).
COPIES_PAUSE_MS = 1_000
COPIES_PAUSE_LATENCIES = 4


def until_still(until: Callable[[Callable[[], bool], float], bool], done: Callable[[], bool],
                moved: Callable[[], object], timeout: float, *,
                clock: Callable[[], float] = time.monotonic) -> bool:
    """``until(done, ...)``, with ``timeout`` counted from the last time the work moved
    (``moved()`` changed, looked at once a second), up to ``DRAIN_PATIENCE`` times it in all:
    work that still moves is not stuck, however slowly the machine runs it."""
    give_up = clock() + DRAIN_PATIENCE * timeout
    last, seen = moved(), clock()
    while True:
        window = min(seen + timeout, give_up) - clock()
        if until(done, min(max(window, 0.0), 1.0)):
            return True
        now = clock()
        if now >= give_up:
            return False
        current = moved()
        if current != last:
            last, seen = current, now
        elif now >= seen + timeout:
            return False


class ConsumerContext:
    def __init__(self, *, scenario_name: str, deployment: ConsumerDeployment, history: History,
                 rng: random.Random) -> None:
        self.scenario_name = scenario_name
        self.deployment = deployment
        self.target = deployment.target
        self.history = history
        self.rng = rng
        self.feed = EventFeed(deployment, history) if self.target.hooks.events else None
        self.nemesis = ConsumerNemesis(deployment, history,
                                       before=self.feed.poll if self.feed else None)
        if self.feed is not None:
            self.feed.skip()  # what consumers did before this scenario is not its evidence
        self._prefix = f"{deployment.run_id}-{uuid.UUID(int=rng.getrandbits(128)).hex[:6]}"
        self._counter = 0
        self._values: dict[str, dict[str, Any]] = {}
        #: Until when (monotonic) a pause the harness asked for may still hold a job.
        self._busy_until = 0.0
        self._lock = threading.Lock()

    # ---- messages --------------------------------------------------------------------------

    def new_key(self) -> str:
        with self._lock:
            self._counter += 1
            return f"{self._prefix}-{self._counter:04d}"

    def same_body(self, key: str, as_key: str) -> None:
        """Give ``key``'s messages the values of ``as_key``'s (amount, nonce): where the body
        does not carry the key, the two jobs' bodies are then the same bytes."""
        with self._lock:
            self._values[key] = self._values.setdefault(as_key, self._fresh_values())

    def _fresh_values(self) -> dict[str, Any]:
        return {"amount": self.rng.randint(100, 99_999), "nonce": uuid.uuid4().hex}

    def _hooks(self, pause: tuple[str, int] | None,
               failure: tuple[str, str] | None) -> tuple[Hook, ...]:
        hooks: list[Hook] = []
        if pause is not None and self.target.hooks.pause is not None:
            spec = self.target.hooks.pause
            point, ms = pause
            template = spec.point(point)
            if template is not None:
                hooks.append(Hook(spec, str(render_template(template, {"ms": ms}))))
        if failure is not None:
            declared = self.target.hooks.work_failure(*failure)
            if declared is not None:
                hooks.append(Hook(declared, declared.value))
        return tuple(hooks)

    def publish(self, key: str, *, label: str = "original", attempt: int = 1,
                poison: bool = False, pause: tuple[str, int] | None = None,
                failure: tuple[str, str] | None = None, encoding: int = 0,
                via: Publisher | None = None, timeout: float | None = None) -> Event:
        """Publish one message for ``key`` and wait for the broker's confirm; recorded as a
        ``publish`` operation: ok (confirmed), fail (refused), info (no confirm: maybe queued).
        Each publish has a message id of its own unless the key is the message id.  ``pause``
        asks the consumer to wait at a point of the job, ``failure`` (when, deliveries) to fail
        it, ``encoding`` to write the JSON body another way (``ENCODINGS``)."""
        invoke, message = self._outgoing(key, label=label, attempt=attempt, poison=poison,
                                         pause=pause, failure=failure, encoding=encoding)
        publisher = via or self.deployment.broker
        return self._confirmed(invoke, publisher.publish([message], timeout=timeout)[0])

    def publish_copies(self, key: str, copies: int, *, label: str = "copy",
                       pause: tuple[str, int] | None = None) -> list[Event]:
        """Publish ``copies`` messages for ``key`` (attempts 1..copies) all before waiting for
        any confirm, so they reach the consumers together however slowly the broker confirms;
        each is its own ``publish`` operation, as ``publish`` records it.  Copy n is written
        in the n-th way of ``ENCODINGS``: the same job, not the same bytes.  The broker spreads
        them where several consumers can take them at once (Kafka: partitions in turn)."""
        outgoing = [self._outgoing(key, label=label, attempt=n, poison=False, pause=pause,
                                   failure=None, encoding=n - 1)
                    for n in range(1, copies + 1)]
        outcomes = self.deployment.broker.publish([m for _, m in outgoing], spread=True)
        return [self._confirmed(invoke, outcome)
                for (invoke, _), outcome in zip(outgoing, outcomes, strict=True)]

    def _outgoing(self, key: str, *, label: str, attempt: int, poison: bool,
                  pause: tuple[str, int] | None, failure: tuple[str, str] | None,
                  encoding: int) -> tuple[Event, MessageParts]:
        with self._lock:  # every message for one key is the same job: the same values
            fixed = self._values.setdefault(key, self._fresh_values())
        deployment = self.deployment
        values = {**fixed, "key": key, "message_id": uuid.uuid4().hex,
                  "queue": deployment.queue, "run": deployment.run_id,
                  "dead_letter_queue": deployment.dead_letter_queue or ""}
        hooks = self._hooks(pause, failure)
        parts = compose(self.target, values, poison=poison, hooks=hooks, encoding=encoding)
        value: dict[str, Any] = {"message_id": parts.message_id, "queue": deployment.queue,
                                 "poison": poison}
        if parts.key is not None:
            value["record_key"] = parts.key
        if encoding and not isinstance(self.target.message.body, str):
            value["encoding"] = ENCODINGS[encoding % len(ENCODINGS)]
        if pause is not None and self.target.hooks.pause is not None:
            value["pause"] = {"point": pause[0], "seconds": pause[1] / 1000,
                              "deliveries": self.target.hooks.pause.deliveries}
            self._busy_until = max(self._busy_until, time.monotonic() + pause[1] / 1000)
        if failure is not None and any(h.spec is not self.target.hooks.pause for h in hooks):
            value["fails"] = {"when": failure[0], "deliveries": failure[1]}
        invoke = self.history.invoke("publish", PRODUCER, key=key, attempt=attempt,
                                     label=label, value=value)
        return invoke, parts

    def _confirmed(self, invoke: Event, published: Published) -> Event:
        """The publish's completion: ok (confirmed), fail (refused), info (maybe queued), with
        where the broker put it when it says (a Kafka record's partition and offset)."""
        kind = {"confirmed": "ok", "refused": "fail", "unknown": "info"}[published.outcome]
        extra = {"value": dict(published.where)} if published.where else {}
        return self.history.complete(invoke, kind, error=published.why,  # type: ignore[arg-type]
                                     **extra)

    # ---- what the scenario meant, and what it saw ------------------------------------------

    def intend(self, what: str, key: str, properties: tuple[str, ...], **details: Any) -> None:
        """Record what the next fault is meant to meet (``what``: a precondition the checker
        knows), so the checker can tell whether it did."""
        self.history.intend(what, key, properties, **details)

    def held_after_work(self, key: str, pause_ms: int, *, incident: str,
                        label: str = "original", **details: Any) -> int:
        """Publish ``key`` with its job paused after its work, before the consumer settles it
        with the broker (its offset commit), and wait until it pauses there (without an events
        feed, until the work's effect shows); the intent that the fault about to come meets the
        job there is recorded (``work-done-commit-pending``, with ``details``) and the queue
        observed.  The consumer holding the job, which the fault is for."""
        self.publish(key, label=label, pause=("before-ack", pause_ms))
        if self.feed is not None:
            self.wait_for_delivery(key, paused=True)
        else:
            self.wait_for_effect(key)
        holder = self.holder(key) or 0
        self.intend("work-done-commit-pending", key, ("P1", "P9"), instance=holder,
                    incident=incident, **details)
        self.observe(key)
        return holder

    def observe(self, key: str) -> Event:
        """Record, just before acting, what can be seen of ``key``'s job: its effects and the
        queue (messages ready, consumers)."""
        if self.feed is not None:
            self.feed.poll()
        effects = self.effects_of(key)
        return self.history.record("ok", "observe", ORACLE, key=key, value={
            "effects": effects, **self.deployment.broker.observation()})

    def job_latency(self) -> float:
        """How long the consumer takes from publish to effect, measured once per run (the
        median of ``LATENCY_SAMPLES`` jobs with fresh keys) and recorded in each scenario that
        asks: without an events feed, faults are timed from it."""
        measured = self.deployment.measured_latency
        if measured is None:
            samples = []
            for _ in range(LATENCY_SAMPLES):
                key = self.new_key()
                started = time.monotonic()
                self.publish(key, label="latency")
                if not self.wait_for_effect(key):
                    break
                samples.append(time.monotonic() - started)
            measured = sorted(samples)[len(samples) // 2] if samples else None
            self.deployment.measured_latency = measured
        self.history.record("ok" if measured is not None else "info", "latency", ORACLE,
                            value={"seconds": measured})
        return measured if measured is not None else SETTLE

    def copies_pause(self, *, measure: bool = True) -> tuple[str, int] | None:
        """The pause before the work that lets copies of a job overlap in two consumers'
        hands (None: the consumer cannot pause): ``COPIES_PAUSE_MS``, or
        ``COPIES_PAUSE_LATENCIES`` job latencies (measured once per run, unless not
        ``measure``: a fault keeps the consumers from the queue) when longer."""
        if "pause-before-work" not in self.target.capabilities():
            return None
        if measure:
            self.job_latency()
        latency = self.deployment.measured_latency or 0.0
        return "before-work", max(COPIES_PAUSE_MS,
                                  int(COPIES_PAUSE_LATENCIES * latency * 1000))

    # ---- waiting on facts ------------------------------------------------------------------

    def until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``done()`` (the consumers' feeds read before each look), at most
        ``timeout`` seconds; True if it came."""
        deadline = time.monotonic() + timeout
        while True:
            if self.feed is not None:
                self.feed.poll()
            if done():
                if self.feed is not None:
                    self.feed.poll()  # what the consumer did while we looked, before we act
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL)

    def effects_of(self, key: str) -> int | None:
        oracle = self.deployment.oracle
        assert oracle is not None
        try:
            return oracle.count(None, key).count
        except Exception:  # the oracle's failure is judged from the recorded effects event
            return None

    def wait_for_effect(self, key: str, *, count: int = 1, timeout: float = SETTLE) -> bool:
        """Wait until the oracle counts ``count`` effects for ``key`` (the work committed)."""
        return self.until(lambda: (self.effects_of(key) or 0) >= count, timeout)

    def wait_for_delivery(self, key: str, *, paused: bool = False, times: int = 1,
                          timeout: float = SETTLE) -> bool:
        """Wait until a consumer has taken ``key``'s message (``times`` deliveries): it
        reports taking it (its events feed; with ``paused``, until it reports waiting at the
        pause hook), or, without a feed, the broker has no message ready on the queue (a
        consumer holds it)."""
        if self.feed is not None:
            feed = self.feed
            if paused:
                return self.until(lambda: feed.paused(key) > 0, timeout)
            return self.until(lambda: feed.delivered(key) >= times, timeout)
        broker = self.deployment.broker
        return self.until(lambda: broker.state().ready == 0, timeout)

    def wait_until_dropped(self, instance: int, *, timeout: float) -> bool:
        """Wait until the broker stops counting consumer ``instance`` (a stalled connection
        it gave up on); True if it did."""
        others = sum(1 for i in self.deployment.instances
                     if i.number != instance and i.process.running())

        def dropped() -> bool:
            return self.deployment.broker.state().members <= others

        return self.until(dropped, timeout)

    def holder(self, key: str) -> int | None:
        """The consumer that last reported taking (or pausing in) ``key``'s message, by its
        events feed; None without one."""
        reported = [e.process for e in self.history.events()
                    if e.f in ("pause", "deliver", "claim") and e.key == key
                    and e.process.startswith("consumer-")]
        return int(reported[-1].removeprefix("consumer-")) if reported else None

    def place_of(self, key: str) -> tuple[int, int] | None:
        """Where the broker put ``key``'s first confirmed message, when it says (a Kafka
        record's partition and offset)."""
        for event in self.history.events():
            if (event.f == "publish" and event.type == "ok" and event.key == key
                    and "offset" in event.value):
                return int(event.value["partition"]), int(event.value["offset"])
        return None

    def committed_past(self, key: str) -> bool:
        """Has the broker settled every message of ``key`` for good, whatever the consumers
        are doing (a Kafka group's committed offset past each of its records)?  Asked only of a
        broker that settles by offsets (capability ``offsets``)."""
        events = self.history.events()
        confirmed = sum(1 for e in events if e.f == "publish" and e.type == "ok"
                        and e.key == key)
        return not self.deployment.broker.unsettled(events, {key: confirmed}, [])

    def observe_queue(self, name: str | None = None) -> None:
        queue = name or self.deployment.queue
        state = self.deployment.broker.state(queue)
        self.history.record("ok", "queue", ORACLE, value={
            "queue": queue, "exists": state.exists, "ready": state.ready,
            "consumers": state.consumers})

    # ---- faults ----------------------------------------------------------------------------

    @contextmanager
    def fault(self, name: str, instance: int = 0) -> Iterator[None]:
        with self.nemesis.fault(name, instance):
            yield

    def kill(self, instance: int = 0) -> None:
        self.nemesis.kill(instance)

    def restart(self, instance: int = 0) -> None:
        self.nemesis.restart(instance)
        self._pauses_again()

    def advance_clock(self, seconds: float) -> None:
        self.nemesis.advance_clock(seconds)

    @property
    def busy_until(self) -> float:
        """Until when (monotonic) a pause the harness asked for may still hold a job."""
        return self._busy_until

    def _pauses_again(self) -> None:
        """A consumer that honours pauses on every delivery pauses again on a redelivery."""
        pause = self.target.hooks.pause
        if pause is None or pause.deliveries == "first":
            return
        longest = max((float(e.value["pause"]["seconds"]) for e in self.history.events()
                       if e.f == "publish" and e.type == "invoke" and "pause" in e.value),
                      default=0.0)
        self._busy_until = max(self._busy_until, time.monotonic() + longest)

    def pass_lease(self) -> float:
        """Let the promised lease of a claim held by a dead consumer run out: on the consumer's
        clock at once (a clock hook, or libfaketime), else in real time up to
        ``REAL_LEASE_LIMIT`` (the drain then waits that much longer); a longer lease is
        recorded as not waited, so the checker says unknown.  The seconds the drain must allow
        beyond its usual wait."""
        lease = self.target.promises.lease
        if lease is None:
            return 0.0
        if self.deployment.clock is not None:
            self.advance_clock(lease + LEASE_SLACK + 1)
            return 0.0
        if lease <= REAL_LEASE_LIMIT:
            return lease + LEASE_SLACK
        self.history.record("info", "lease-not-waited", NEMESIS, value={
            "lease": lease, "reason": f"the promised lease ({lease:g} s) is longer than the "
                                      f"{REAL_LEASE_LIMIT:g} s the harness waits in real time, "
                                      "and the consumer's clock cannot be moved"})
        return 0.0

    def ensure_consumers(self, count: int) -> int:
        """Run ``count`` consumers (when they may share state), and wait (bounded) until the
        broker counts every one whose connection the nemesis has not cut: one still
        reconnecting after an earlier fault would leave the others every message."""
        if count > 1 and not self.target.shares_state:
            return len(self.deployment.instances)
        started = len(self.deployment.instances) < count
        self.deployment.ensure_instances(count)
        pause = self.target.hooks.pause
        if started and pause is not None and pause.deliveries == "every-process":
            self._pauses_again()  # a new process honours the pause of a record it reads again
        connected = sum(1 for i in self.deployment.instances
                        if i.process.running() and i.number not in self.deployment.cut_off)
        broker = self.deployment.broker
        self.until(lambda: broker.state().consumers >= connected, SETTLE)
        return len(self.deployment.instances)

    def start_member(self, number: int) -> None:
        """Start consumer ``number`` (a new one, or one stopped), with no fault of the
        nemesis's behind it: a member joining the group; wait until it is ready."""
        if number < len(self.deployment.instances):
            self.deployment.start_again(number)
        else:
            self.deployment.ensure_instances(number + 1)
        pause = self.target.hooks.pause
        if pause is not None and pause.deliveries == "every-process":
            self._pauses_again()  # a new process honours the pause of a record it reads again

    def notice_exits(self) -> None:
        for number, code in self.deployment.exited_by_themselves():
            self.nemesis.exited(number, code, self.scenario_name)
            self.deployment.start_again(number)

    # ---- the end of a scenario -------------------------------------------------------------

    def _published(self) -> tuple[Counter[str], set[str], set[str]]:
        """Confirmed publishes per key; the keys that must have an effect (ordinary jobs,
        except those made to fail on every delivery); the keys that must be dead-lettered (a
        poison message, a job that always fails)."""
        events = self.history.events()
        invokes = {e.op: e for e in events if e.f == "publish" and e.type == "invoke"}
        confirmed: Counter[str] = Counter()
        effectful, rejected = set(), set()
        for event in events:
            if event.f == "publish" and event.type == "ok" and event.key is not None:
                confirmed[event.key] += 1
                value = invokes[event.op].value
                fails = value.get("fails") or {}
                if value.get("poison") or fails.get("deliveries") == "every":
                    rejected.add(event.key)
                else:
                    effectful.add(event.key)
        return confirmed, effectful - rejected, rejected

    def drain(self, *, timeout: float = SETTLE) -> None:
        """Wait until the queue has settled: nothing ready, every rejected message in the
        dead-letter queue, and every message's job finished: with a feed, each message acked
        or dead-lettered for good and no live consumer holding one (read from after the last
        restart); without one, every confirmed job's effect counted, then effects and the queue
        unchanged for a quiet interval once every pause the harness asked for is over.  Then
        stop the consumers (what they had not acked goes back to the queue), record what is
        left and what was dead-lettered, take it all off, and start them again.  The drain is
        ``ok`` when nothing was left.  P2, P9 and P10 are judged from it."""
        confirmed, effectful, rejected = self._published()
        dlq = self.deployment.dead_letter_queue
        broker, queue = self.deployment.broker, self.deployment.queue
        started = time.monotonic()
        why: dict[str, str] = {}

        def settled() -> bool:
            if broker.state().ready:
                why.clear()
                why["queue"] = "messages ready in the queue"
                return False
            if self.feed is not None:
                self.feed.poll()  # after the queue was seen empty: what was taken is reported
                if not self.feed.polled_every_process():
                    return False
                why.clear()
                why.update(broker.unsettled(self.history.events(), confirmed, self.feed.live()))
                if why:
                    return False
            elif any((self.effects_of(k) or 0) < 1 for k in effectful):
                return False
            return not (dlq and rejected and broker.state(dlq).ready < len(rejected))

        def moved() -> tuple[int, int]:
            done = sum(self.effects_of(k) or 0 for k in effectful)
            return (broker.state(dlq).ready if dlq else 0), done

        allowed = timeout + max(0.0, self._busy_until - time.monotonic())
        drained = until_still(self.until, settled, moved, allowed)
        if drained and self.feed is None:
            drained = self._quiet(settled, timeout)
        waited = time.monotonic() - started
        # A consumer that reported every delivery settled holds nothing unacked; otherwise stop
        # the consumers, so what they hold goes back to the queue and can be counted.
        stop = not (drained and self.feed is not None)
        if stop:
            for instance in self.deployment.instances:
                if instance.process.running():
                    self.deployment.stop(instance.number)
            if self.feed is not None:
                self.feed.poll()
        left = broker.take_all(queue)
        dead = broker.take_all(dlq) if dlq else []
        self.history.record("info" if left else "ok", "drain", ORACLE, value={
            "settled": drained, "waited": round(waited, 3), "allowed": round(allowed, 3),
            "left": len(left),
            "dead_lettered": len(dead), "queue": queue, "dead_letter_queue": dlq,
            "consumers_stopped": stop,
            **({"unsettled": dict(list(why.items())[:5])} if why and not drained else {})})
        for message in left:
            self.history.record("ok", "leftover", ORACLE, key=self._key_of(message),
                                value={"message_id": message.message_id or message.place,
                                       "redelivered": message.redelivered})
        for message in dead:
            self.history.record("ok", "dead-lettered", ORACLE, key=self._key_of(message),
                                value={"message_id": message.message_id or message.place,
                                       "queue": dlq})
        if stop:
            for instance in self.deployment.instances:
                self.deployment.start_again(instance.number)

    def _quiet(self, settled: Callable[[], bool], timeout: float) -> bool:
        """Without a feed, work in flight cannot be seen: wait until every pause the harness
        asked for is over, then ask the queue and the effects to stay settled for a quiet
        interval (``QUIET``, or three job latencies when longer)."""
        latency = self.deployment.measured_latency or 0.0
        deadline = time.monotonic() + timeout
        while time.monotonic() < self._busy_until:
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL)
        interval = max(QUIET, 3 * latency)
        while time.monotonic() < deadline:
            before = {k: self.effects_of(k) for k in self._published()[0]}
            quiet_until = time.monotonic() + interval
            steady = True
            while time.monotonic() < quiet_until:
                time.sleep(POLL)
                if not settled():
                    steady = False
                    break
            if steady and before == {k: self.effects_of(k) for k in before}:
                return True
        return False
    def publish_losing_confirm(self, key: str) -> Event:
        """Publish ``key``'s message on a connection of its own whose way back from the broker
        is held: the broker queues it, its confirm never arrives, the publish ends unknown;
        then that connection is dropped, as a producer that gives up on it does."""
        proxy, publisher = self.deployment.broker.losing_publisher()
        try:
            with self.nemesis.producer_fault(proxy):
                return self.publish(key, via=publisher, timeout=1.0)
        finally:
            publisher.close()

    def _key_of(self, message: Received) -> str | None:
        """Whose job a message taken off the queue was: its dedup key where the consumer
        reads it, else the publish it was (by message id), else a published key its body
        names."""
        spec = self.target.message
        if spec.dedup == "header":
            return header_text(message.headers, spec.dedup_header)
        if spec.dedup == "message-id":
            return message.message_id
        if spec.dedup == "key":
            return message.record_key
        invokes = [e for e in self.history.events() if e.f == "publish" and e.type == "invoke"]
        published = {e.value.get("message_id"): e.key for e in invokes}
        if message.place is None or message.message_id is not None:
            return published.get(message.message_id)
        text = message.body.decode("utf-8", "replace")  # a record: no id, its body names it
        return next((e.key for e in invokes if e.key and e.key in text), None)

    def collect_effects(self) -> None:
        oracle = self.deployment.oracle
        assert oracle is not None
        keys = dict.fromkeys(e.key for e in self.history.events()
                             if e.f == "publish" and e.type == "invoke" and e.key is not None)
        for key in keys:
            record_effects(self.history, oracle, None, key)

    def observe_store_size(self) -> dict[str, int]:
        size = self.deployment.store_size()
        self.history.record("ok", "store-size", ORACLE, value=dict(size))
        return size

"""What a consumer scenario may do, each step recorded in the history: publish (confirmed),
wait for broker or consumer facts, fault the consumer's connection, kill and restart it, move
its clock, and drain the queue at the end so the checker knows what became of every message.

Scenarios synchronise on facts, never on sleeps: an effect the oracle counts, a consumer the
broker stops counting, a delivery the consumer reports.  Every wait is bounded, and a wait that
runs out is recorded, so the checker says "unknown" rather than guess.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from harness._history import NEMESIS, ORACLE, Event, History
from harness._oracle import record_effects
from harness._target import LEASE_SLACK, REAL_LEASE_LIMIT, render_template
from harness.consumer._amqp import AmqpClient, Outgoing, PublishOutcome, header_text
from harness.consumer._deployment import ConsumerDeployment
from harness.consumer._events import EventFeed
from harness.consumer._nemesis import ConsumerNemesis

__all__ = ["PRODUCER", "SETTLE", "ConsumerContext"]

PRODUCER = "producer"
#: Seconds a scenario waits for the consumer to do what any consumer does in milliseconds.
SETTLE = 15.0
POLL = 0.03
#: Seconds a consumer without an events feed must stay settled before the queue counts as
#: drained (it cannot say what it is still working on).
QUIET = 1.0


class ConsumerContext:
    def __init__(self, *, scenario_name: str, deployment: ConsumerDeployment, history: History,
                 rng: random.Random) -> None:
        self.scenario_name = scenario_name
        self.deployment = deployment
        self.target = deployment.target
        self.history = history
        self.rng = rng
        self.nemesis = ConsumerNemesis(deployment, history)
        self.feed = EventFeed(deployment, history) if self.target.hooks.events else None
        if self.feed is not None:
            self.feed.skip()  # what consumers did before this scenario is not its evidence
        self._prefix = f"{deployment.run_id}-{uuid.UUID(int=rng.getrandbits(128)).hex[:6]}"
        self._counter = 0
        self._values: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    # ---- messages --------------------------------------------------------------------------

    def new_key(self) -> str:
        with self._lock:
            self._counter += 1
            return f"{self._prefix}-{self._counter:04d}"

    def _message(self, key: str, *, poison: bool, pause: tuple[str, int] | None,
                 message_id: str) -> tuple[bytes, dict[str, Any], str | None]:
        spec = self.target.message
        with self._lock:  # every message for one key is the same job: the same body
            fixed = self._values.setdefault(key, {"amount": self.rng.randint(100, 99_999),
                                                  "nonce": uuid.uuid4().hex})
        values = {**fixed, "key": key, "message_id": message_id}
        body = render_template(spec.poison if poison else spec.body, values)
        headers = {k: render_template(v, values) for k, v in spec.headers.items()}
        if spec.dedup == "header":
            headers[spec.dedup_header] = key
        if pause is not None and self.target.hooks.pause is not None:
            hook = self.target.hooks.pause
            point, ms = pause
            headers[hook.header] = str(render_template(hook.points[point],  # type: ignore[index]
                                                       {"ms": ms}))
        if spec.dedup == "message-id":
            mid: str | None = key
        else:
            mid = str(render_template(spec.message_id, values))
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return raw, headers, mid

    def publish(self, key: str, *, label: str = "original", attempt: int = 1,
                poison: bool = False, pause: tuple[str, int] | None = None,
                via: AmqpClient | None = None, timeout: float | None = None) -> Event:
        """Publish one message for ``key`` and wait for the broker's confirm; recorded as a
        ``publish`` operation: ok (confirmed), fail (refused), info (no confirm: maybe queued).
        Each publish has a message id of its own unless the key is the message id."""
        invoke, message = self._outgoing(key, label=label, attempt=attempt, poison=poison,
                                         pause=pause)
        client = via or self.deployment.amqp
        return self._confirmed(invoke, client.publish(message, timeout=timeout))

    def publish_copies(self, key: str, copies: int, *, label: str = "copy",
                       pause: tuple[str, int] | None = None) -> list[Event]:
        """Publish ``copies`` messages for ``key`` (attempts 1..copies) all before waiting for
        any confirm, so they reach the consumers together however slowly the broker confirms;
        each is its own ``publish`` operation, as ``publish`` records it."""
        outgoing = [self._outgoing(key, label=label, attempt=n, poison=False, pause=pause)
                    for n in range(1, copies + 1)]
        outcomes = self.deployment.amqp.publish_at_once([m for _, m in outgoing])
        return [self._confirmed(invoke, outcome)
                for (invoke, _), outcome in zip(outgoing, outcomes, strict=True)]

    def _outgoing(self, key: str, *, label: str, attempt: int, poison: bool,
                  pause: tuple[str, int] | None) -> tuple[Event, Outgoing]:
        body, headers, message_id = self._message(key, poison=poison, pause=pause,
                                                  message_id=uuid.uuid4().hex)
        invoke = self.history.invoke(
            "publish", PRODUCER, key=key, attempt=attempt, label=label,
            value={"message_id": message_id, "queue": self.deployment.queue,
                   "poison": poison})
        return invoke, Outgoing(self.deployment.exchange, self.deployment.routing_key, body,
                                message_id, headers, self.target.message.content_type)

    def _confirmed(self, invoke: Event, outcome: tuple[PublishOutcome, str | None]) -> Event:
        confirm, why = outcome
        kind = {"confirmed": "ok", "refused": "fail", "unknown": "info"}[confirm]
        return self.history.complete(invoke, kind, error=why)  # type: ignore[arg-type]

    def publish_losing_confirm(self, key: str) -> Event:
        """Publish ``key``'s message on a connection of its own whose way back from the broker
        is held: the broker queues it, its confirm never arrives, the publish ends unknown;
        then that connection is dropped, as a producer that gives up on it does."""
        proxy = self.deployment.producer_proxy()
        client = AmqpClient(self.deployment.through(proxy.listen), timeout=5.0)
        try:
            client.queue_state(self.deployment.queue)  # connect before the fault
            with self.nemesis.producer_fault(proxy):
                return self.publish(key, via=client, timeout=1.0)
        finally:
            client.close()

    # ---- waiting on facts ------------------------------------------------------------------

    def _until(self, done: Callable[[], bool], timeout: float) -> bool:
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
        return self._until(lambda: (self.effects_of(key) or 0) >= count, timeout)

    def wait_for_delivery(self, key: str, *, paused: bool = False,
                          timeout: float = SETTLE) -> bool:
        """Wait until a consumer reports taking ``key``'s message (its events feed; with
        ``paused``, until it reports waiting at the pause hook), or, when it cannot report,
        until its store shows a key in progress."""
        if self.feed is not None:
            feed = self.feed
            if paused:
                return self._until(lambda: feed.paused(key) > 0, timeout)
            return self._until(lambda: feed.delivered(key) > 0, timeout)
        if self.target.hooks.store_size and self.target.hooks.store_size.reports_in_progress:
            return self._until(
                lambda: self.deployment.store_size().get("in_progress", 0) > 0, timeout)
        return False

    def wait_until_dropped(self, instance: int, *, timeout: float) -> bool:
        """Wait until the broker stops counting consumer ``instance`` (a stalled connection
        it gave up on); True if it did."""
        others = sum(1 for i in self.deployment.instances
                     if i.number != instance and i.process.running())

        def dropped() -> bool:
            return self.deployment.amqp.queue_state(self.deployment.queue).consumers <= others

        return self._until(dropped, timeout)

    def observe_queue(self, name: str | None = None) -> None:
        queue = name or self.deployment.queue
        state = self.deployment.amqp.queue_state(queue)
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

    def advance_clock(self, seconds: float) -> None:
        self.nemesis.advance_clock(seconds)

    def pass_lease(self) -> float:
        """Let the promised lease of a claim held by a dead consumer run out: on the consumer's
        clock at once (clock hook), else in real time up to ``REAL_LEASE_LIMIT`` (the drain
        then waits that much longer); a longer lease is recorded as not waited, so the
        checker says unknown.  The seconds the drain must allow beyond its usual wait."""
        lease = self.target.promises.lease
        if lease is None:
            return 0.0
        if self.target.hooks.clock is not None:
            self.advance_clock(lease + LEASE_SLACK + 1)
            return 0.0
        if lease <= REAL_LEASE_LIMIT:
            return lease + LEASE_SLACK
        self.history.record("info", "lease-not-waited", NEMESIS, value={
            "lease": lease, "reason": f"the promised lease ({lease:g} s) is longer than the "
                                      f"{REAL_LEASE_LIMIT:g} s the harness waits in real time, "
                                      "and the consumer has no clock hook"})
        return 0.0

    def ensure_consumers(self, count: int) -> int:
        if count > 1 and not self.target.shares_state:
            return len(self.deployment.instances)
        self.deployment.ensure_instances(count)
        return len(self.deployment.instances)

    def notice_exits(self) -> None:
        for number, code in self.deployment.exited_by_themselves():
            self.nemesis.exited(number, code, self.scenario_name)
            self.deployment.start_again(number)

    # ---- the end of a scenario -------------------------------------------------------------

    def _published(self) -> tuple[set[str], set[str]]:
        """Keys whose message the broker confirmed (and that must have an effect), and keys of
        poison messages (that must be dead-lettered, when the consumer promises a queue)."""
        confirmed: dict[int, bool] = {}
        ordinary, poison = set(), set()
        events = self.history.events()
        invokes = {e.op: e for e in events if e.f == "publish" and e.type == "invoke"}
        for event in events:
            if event.f == "publish" and event.type == "ok" and event.key is not None:
                confirmed[event.op] = True
                if invokes[event.op].value.get("poison"):
                    poison.add(event.key)
                else:
                    ordinary.add(event.key)
        return ordinary, poison

    def drain(self, *, timeout: float = SETTLE) -> None:
        """Wait until the queue has settled: nothing ready, every poison message in the
        dead-letter queue, and every delivery settled (a consumer with an events feed says so)
        or, without a feed, every confirmed message's effect counted.  Then stop the consumers
        (what they had not acked goes back to the queue), record what is left and what was
        dead-lettered, take it all off, and start them again.  The drain is ``ok`` when nothing
        was left: every message was acked or dead-lettered.  P2, P9 and P10 are judged from it."""
        ordinary, poison = self._published()
        dlq = self.deployment.dead_letter_queue
        amqp, queue = self.deployment.amqp, self.deployment.queue
        started = time.monotonic()

        def settled() -> bool:
            if amqp.queue_state(queue).ready:
                return False
            if self.feed is not None:
                if not self.feed.settled(ordinary | poison):
                    return False
            elif any((self.effects_of(k) or 0) < 1 for k in ordinary):
                return False
            return not (dlq and poison and amqp.queue_state(dlq).ready < len(poison))

        drained = self._until(settled, timeout)
        if drained and self.feed is None:
            drained = self._quiet(settled)
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
        left = amqp.take_all(queue)
        dead = amqp.take_all(dlq) if dlq else []
        self.history.record("info" if left else "ok", "drain", ORACLE, value={
            "settled": drained, "waited": round(waited, 3), "left": len(left),
            "dead_lettered": len(dead), "queue": queue, "dead_letter_queue": dlq,
            "consumers_stopped": stop})
        for message in left:
            self.history.record("ok", "leftover", ORACLE, key=self._key_of(message.headers,
                                                                          message.message_id,
                                                                          message.body),
                                value={"message_id": message.message_id,
                                       "redelivered": message.redelivered})
        for message in dead:
            self.history.record("ok", "dead-lettered", ORACLE,
                                key=self._key_of(message.headers, message.message_id,
                                                 message.body),
                                value={"message_id": message.message_id, "queue": dlq})
        if stop:
            for instance in self.deployment.instances:
                self.deployment.start_again(instance.number)

    def _quiet(self, settled: Callable[[], bool]) -> bool:
        """Without a feed, in-flight work cannot be seen: ask for the queue and the effects to
        stay settled for ``QUIET`` seconds (then the graceful stop lets what runs finish)."""
        before = {k: self.effects_of(k) for k in self._published()[0]}
        deadline = time.monotonic() + QUIET
        while time.monotonic() < deadline:
            time.sleep(POLL)
            if not settled():
                return False
        return before == {k: self.effects_of(k) for k in before}

    def _key_of(self, headers: dict[str, Any] | Any, message_id: str | None,
                body: bytes) -> str | None:
        spec = self.target.message
        if spec.dedup == "header":
            return header_text(headers, spec.dedup_header)
        if spec.dedup == "message-id":
            return message_id
        published = {e.value.get("message_id"): e.key for e in self.history.events()
                     if e.f == "publish" and e.type == "invoke"}
        return published.get(message_id)

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

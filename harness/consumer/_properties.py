"""P1, P2, P9, P10 and P11 judged over a queue consumer's history.

Under the same ids as for an HTTP service (the dedup key is the idempotency key), registered in
``QUEUE_PROPERTIES``.

Where the evidence cannot decide (the queue did not settle, an oracle could not count, a lease
had not passed) the verdict is unknown with the reason: a false finding is as bad as a miss.
"""

from __future__ import annotations

from collections.abc import Iterator

from harness._durations import format_duration
from harness._history import Event
from harness.consumer._account import queue_account, windows
from harness.consumer._analysis import Incident, Publish, QueueView
from harness.consumer._preconditions import unexercised
from harness.consumer._target import ConsumerPromises
from harness.judging._analysis import EffectsSeen, View, past_the_lease
from harness.judging._checker import CheckOptions, Inconclusive, Registry, prop
from harness.judging._findings import Finding, Note

__all__ = ["QUEUE_PROPERTIES"]

#: The same property ids as an HTTP service's, judged over a queue consumer's history: this
#: module registers them when it is imported (the registry imports it on first use).
QUEUE_PROPERTIES = Registry("harness.consumer._properties")
QUEUE_PROPERTIES.summarise(queue_account)


@QUEUE_PROPERTIES.exercises
def exercised(view: View, options: CheckOptions) -> frozenset[str]:
    """The properties a consumer's history gave something to judge: P1 and P2 an ordinary
    message; P9 a kill or a lost connection; P10 a poison message (or a consumer that
    exited); P11 a reading of the dedup table."""
    queue = QueueView(view)
    used: set[str] = {"P1", "P2"} if queue.ordinary() else set()
    if queue.incidents():
        used.add("P9")
    if queue.poisoned() or view.exits:
        used.add("P10")
    if view.store_sizes:
        used.add("P11")
    return frozenset(used)


def _promises(options: CheckOptions) -> ConsumerPromises:
    promises = options.promises
    return promises if isinstance(promises, ConsumerPromises) else ConsumerPromises()


def _effects(view: View, key: str) -> EffectsSeen:
    seen = view.effects.get((None, key))
    if seen is None or seen.count is None:
        reason = seen.error if seen and seen.error else "no effects were recorded"
        raise Inconclusive(f"side effects of key {key} unknown: {reason}")
    return seen


def _untested(view: View, property_id: str, found: set[str]) -> Iterator[Note]:
    """A key whose scenario cannot show that its fault met the job as meant: a property that
    found nothing wrong with it is undecided, never a pass (harness/consumer/_preconditions)."""
    for key, reason in unexercised(view, property_id).items():
        if key not in found:
            yield Note(property_id, key, f"key {key}: {reason}", undecided=True)


def _why_twice(queue: QueueView, key: str, publishes: list[Publish]) -> tuple[str, str]:
    """How a key ran twice, told from the evidence alone, as a mechanism and its words; the
    words are silent when it cannot tell."""
    ids = {p.message_id for p in publishes}
    redelivered = [d for d in queue.events_of("deliver", key) if d.value.get("redelivered")]
    first, last = publishes[0].invoke.time, publishes[-1].invoke.time
    if any(e.f == "clock" and first <= e.time <= last for e in queue.view.events):
        return ("forgotten-within-window",
                "The key came back after the consumer's clock moved, still within the promised "
                "dedup window, and ran again: the consumer forgot the key too early.")
    if len(ids) > 1 and any(p.invoke.label == "republish" for p in publishes):
        return ("republish-ran-again",
                "The producer published the same key again as a new message and the consumer "
                "ran it as a new job: it deduplicates on something of the message's own (its "
                "id, its place in the log) at most, not on the key.")
    if len(ids) > 1:
        return ("concurrent-copies",
                "Copies of the message with the same key were each run: the key was not "
                "claimed atomically before the work, if at all.")
    if queue.incidents():
        return ("rerun-after-incident",
                "The message came back after " + queue.incidents()[0].what + ", and the "
                "consumer ran the job again instead of finding the key done.")
    if redelivered:
        return ("redelivery-ran-again",
                "A redelivered message ran the job again instead of finding the key done.")
    return "ran-again", ""


@prop("P1", "at most one effect per dedup key", registry=QUEUE_PROPERTIES)
def at_most_once(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    queue = QueueView(view)
    window = _promises(options).dedup_window
    found: set[str] = set()
    for key, publishes in queue.ordinary():
        effects = _effects(view, key)
        allowed = windows(view, publishes, window)
        assert effects.count is not None
        if effects.count > allowed:
            found.add(key)
            span = "" if allowed == 1 else f" ({allowed} dedup windows)"
            mechanism, why = _why_twice(queue, key, publishes)
            yield Finding("P1", key,
                          f"{effects.count} effects for key {key} where at most {allowed} may "
                          f"exist{span}: {queue.story(key)}. {why}".rstrip(),
                          queue.evidence(key, effects.index), mechanism=mechanism)
        elif allowed > 1 and effects.count > 1:
            yield Note("P1", key,
                       f"{effects.count} effects for key {key}: a message came after the "
                       f"promised dedup window ({format_duration(window or 0)}) and ran as a "
                       "new job, which the contract allows")
    yield from _untested(view, "P1", found)


@prop("P2", "no lost outcome: every confirmed message has exactly one effect once the queue "
            "drains", registry=QUEUE_PROPERTIES)
def no_lost_outcome(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    queue = QueueView(view)
    promises = _promises(options)
    found: set[str] = set()
    for key, publishes in queue.ordinary():
        if not any(p.confirmed for p in publishes):
            continue
        effects = _effects(view, key)
        if effects.count:
            continue
        found.add(key)
        left = queue.events_of("leftover", key)
        dead = queue.events_of("dead-lettered", key)
        if dead and any(p.fails for p in publishes) and _gives_up_at_once(promises):
            yield Note("P2", key,
                       f"the job for key {key} failed and was dead-lettered without an "
                       "effect, as the consumer promises for a failed job "
                       f"(on_failure = {promises.on_failure}, max_attempts = "
                       f"{promises.max_attempts})")
        elif dead:
            yield Finding("P2", key,
                          f"the confirmed message for key {key} was dead-lettered without an "
                          f"effect: a valid job was thrown away ({queue.story(key)})",
                          queue.evidence(key, effects.index), mechanism="valid-job-dead-lettered")
        elif left:
            yield Note("P2", key,
                       f"the message for key {key} was still in the queue when the run "
                       "stopped waiting, with no effect: whether it would have run is unknown",
                       undecided=True)
        elif queue.drained is None:
            yield Note("P2", key, f"key {key} has no effect and the queue did not settle: "
                                  "whether its job was lost is unknown", undecided=True)
        elif promises.ack == "before-work" and queue.incidents():
            yield Note("P2", key,
                       f"key {key} has no effect: its message was acked before the work and "
                       f"lost with the consumer, which the target admits (ack = before-work)")
        else:
            mechanism, why = _why_lost(queue, publishes)
            yield Finding("P2", key,
                          f"the broker confirmed the message for key {key}, the queue drained, "
                          f"and there is no effect: the job is lost ({queue.story(key)}). "
                          + why,
                          queue.evidence(key, effects.index,
                                         *(d.index for d in queue.drains[-1:])),
                          mechanism=mechanism)
    yield from _untested(view, "P2", found)


def _gives_up_at_once(promises: ConsumerPromises) -> bool:
    """Does the consumer promise to dead-letter a job at its first failure?"""
    return promises.on_failure == "dead-letter" or promises.max_attempts == 1


def _why_lost(queue: QueueView, publishes: list[Publish]) -> tuple[str, str]:
    """How a job was lost, as a mechanism and its words."""
    failed = queue.events_of("work-failed", publishes[0].key or "") if publishes else []
    if any(p.fails == "before-work" for p in publishes) or failed:
        return ("claim-kept-after-failure",
                "Its job failed once, and its retry was acked without the work: the key was "
                "left claimed (or marked done) by the failed attempt.")
    if queue.incidents():
        return ("acked-before-work",
                f"The message was gone from the queue after {queue.incidents()[0].what}: it "
                "was acked before its work was done.")
    return "acked-never-done", "Its message was acked and its work never done."


@prop("P9", "crash safety: after a kill or a lost connection, redeliveries converge to one "
            "effect and no key is stuck", registry=QUEUE_PROPERTIES)
def crash_safety(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    queue = QueueView(view)
    promises = _promises(options)
    found: set[str] = set()
    for key, publishes in queue.ordinary():
        # Judged once per key, against the first incident its message lived through.
        incident = next((i for i in queue.incidents()
                         if any(p.maybe_queued and p.invoke.time <= i.end.time
                                for p in publishes)), None)
        if incident is not None:
            allowed = windows(view, publishes, promises.dedup_window)
            judged = list(_converged(queue, incident, key, publishes, promises, allowed))
            if any(isinstance(j, Finding) for j in judged):
                found.add(key)
            yield from judged
    yield from _untested(view, "P9", found)


def _converged(queue: QueueView, incident: Incident, key: str, publishes: list[Publish],
               promises: ConsumerPromises, allowed: int) -> Iterator[Finding | Note]:
    """``key``'s redeliveries after ``incident``: one effect per dedup window its publishes
    span (``allowed``; a key published again past its window may run again), and not stuck.
    Only effects the incident can have caused are its doing: not those counted before it, nor
    those its key's messages may each have made once."""
    view = queue.view
    effects = _effects(view, key)
    evidence = queue.evidence(key, incident.start.index, incident.end.index, effects.index)
    left = queue.events_of("leftover", key)
    drain = queue.drains[-1] if queue.drains else None
    if left or drain is None or (drain.type != "ok" and not effects.count):
        waited = (view.target_time(drain) - view.target_time(incident.end)) if drain else 0.0
        lease = promises.lease
        if drain is not None and lease is not None and past_the_lease(
                lease, since=view.target_time(incident.end), at=view.target_time(drain)):
            yield Finding("P9", key,
                          f"key {key} was still not done {format_duration(waited)} after "
                          f"{incident.what}, past the promised lease of "
                          f"{format_duration(lease)}: it is stuck ({queue.story(key)})",
                          evidence, mechanism="stuck")
        else:
            yield Note("P9", key,
                       f"after {incident.what} key {key} had not settled when the run "
                       "stopped waiting" + (f", before the promised lease of "
                                            f"{format_duration(lease)} ran out"
                                            if lease is not None else "")
                       + ": whether it is stuck is unknown", undecided=True)
        return
    # a key that ran twice before the incident (a republish under a new message id, a key
    # forgotten within its window) is P1's, not the incident's doing
    before = view.counted_before((None, key), incident.start.index)
    if effects.count is None or effects.count <= max(allowed, before):
        return
    # the count says how many effects, not which message made each: while there are no more
    # than the key's messages, each may have run once on its own (P1 judges that); only more
    # shows a message run again
    messages = sum(1 for p in publishes if p.maybe_queued)
    if effects.count <= messages:
        yield Note("P9", key,
                   f"after {incident.what} key {key} ended with {effects.count} effects from "
                   f"{messages} messages, each of which may have run once (P1 judges that): "
                   "whether the incident ran one of them again is unknown", undecided=True)
        return
    expected = ("exactly one" if allowed == 1
                else f"one per dedup window its messages span ({allowed})")
    yield Finding("P9", key,
                  f"after {incident.what}, key {key} ended with {effects.count} effects "
                  f"instead of {expected} ({queue.story(key)})", evidence,
                  mechanism="ran-again-after-incident")


@prop("P10", "poison messages cause no effect, do not loop, and the consumer keeps serving",
      registry=QUEUE_PROPERTIES)
def poison(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    queue = QueueView(view)
    promises = _promises(options)
    for key, publishes in queue.poisoned():
        what = ("poison message" if any(p.invoke.value.get("poison") for p in publishes)
                else "message whose job always fails")
        effects = _effects(view, key)
        evidence = queue.evidence(key, effects.index)
        if effects.count:
            yield Finding("P10", key, f"the {what} for key {key} caused "
                                      f"{effects.count} effect(s)", evidence,
                          mechanism="poison-had-effect")
        delivered = queue.events_of("deliver", key)
        limit = promises.max_attempts
        if limit is not None and len(delivered) > limit:
            yield Finding("P10", key,
                          f"the {what} for key {key} was delivered {len(delivered)} "
                          f"times where the consumer promises at most {limit} attempts: it "
                          "loops instead of being dead-lettered", evidence,
                          mechanism="poison-loops")
            continue
        left = queue.events_of("leftover", key)
        dead = queue.events_of("dead-lettered", key)
        dlq = (queue.drains[-1].value.get("dead_letter_queue") if queue.drains else None) \
            or promises.dead_letter_queue
        held = _claim_may_hold(queue, publishes[0].invoke, promises)
        if left and promises.dead_letter_queue and queue.drains and held is not None:
            yield Note("P10", key,
                       f"the {what} for key {key} was still in the queue when the run stopped "
                       f"waiting, {held}: a claim left by a delivery the incident interrupted "
                       "may hold it until then, so whether it loops is unknown",
                       undecided=True)
        elif left and promises.dead_letter_queue and queue.drains:
            yield Finding("P10", key,
                          f"the {what} for key {key} was still in the queue after "
                          f"{format_duration(float(queue.drains[-1].value.get('waited', 0)))}"
                          f", never dead-lettered to {dlq} as promised"
                          + (f" ({len(delivered)} deliveries seen)" if delivered else
                             ": it keeps coming back"), evidence, mechanism="poison-loops")
        elif promises.dead_letter_queue and not dead and not left and queue.drained:
            yield Finding("P10", key,
                          f"the {what} for key {key} was dropped: it is neither in "
                          f"the queue nor in the promised dead-letter queue {dlq}", evidence,
                          mechanism="poison-dropped")
    yield from _kept_serving(queue)


def _claim_may_hold(queue: QueueView, published: Event,
                    promises: ConsumerPromises) -> str | None:
    """Why a message still in the queue at the drain may only be waiting for a claim to run
    out (in words), or None: an incident (a kill, a cut or stalled connection) came after it was
    published, and the drain came before the promised lease had passed since the incident
    began."""
    lease, drain = promises.lease, queue.drains[-1] if queue.drains else None
    if lease is None or drain is None:
        return None
    view = queue.view
    for incident in queue.incidents():
        if incident.start.time < published.time:
            continue
        began, drained = view.target_time(incident.start), view.target_time(drain)
        if not past_the_lease(lease, since=began, at=drained):
            return (f"{format_duration(drained - began)} after {incident.what}, within the "
                    f"promised lease of {format_duration(lease)}")
    return None


def _kept_serving(queue: QueueView) -> Iterator[Finding]:
    for exit_event in queue.view.exits:
        yield Finding("P10", None,
                      f"the consumer exited with code {exit_event.value.get('code')} during "
                      f"{exit_event.value.get('scenario')}: nothing killed it",
                      (exit_event.index,), mechanism="consumer-exited")
    if not queue.poisoned():
        return
    first_poison = min(p.invoke.time for _, ps in queue.poisoned() for p in ps)
    for key, publishes in queue.ordinary():
        if any(p.invoke.label == "control" and p.invoke.time > first_poison for p in publishes):
            seen = queue.view.effects.get((None, key))
            if seen is not None and seen.count == 0 and queue.drained is not None:
                yield Finding("P10", key,
                              f"after the poison message, an ordinary message (key {key}) "
                              "was never processed: the consumer stopped serving",
                              queue.evidence(key, seen.index), mechanism="stopped-serving")


@prop("P11", "bounded storage: expired dedup keys are removed", registry=QUEUE_PROPERTIES)
def bounded_storage(view: View, options: CheckOptions) -> Iterator[Finding]:
    queue = QueueView(view)
    window = _promises(options).dedup_window
    if not view.store_sizes or window is None or not view.events:
        return
    grace, allowed = options.promises.expiry_allowance()
    start = view.target_time(view.events[0])
    for observation in view.store_sizes:
        now = view.target_time(observation)
        if now < start + window + grace:
            continue
        # A key published again within the window may be stored again (by a consumer that
        # keys on the message id, say): only a key with no publish in it must be gone.
        last = [max(view.target_time(p.invoke) for p in publishes if p.invoke.time
                    <= observation.time) for publishes in queue.publishes.values()
                if any(p.invoke.time <= observation.time for p in publishes)]
        live = sum(1 for published in last if now - window - grace < published)
        rows = int(observation.value.get("rows", 0))
        if rows > live:
            expired = [published for published in last if published <= now - window - grace]
            past = (f", the oldest {format_duration(now - window - min(expired))} past it"
                    if expired else "")
            yield Finding("P11", None,
                          f"the dedup table holds {rows} rows {format_duration(now - start)} "
                          f"into the run, but only {live} keys are within the dedup window of "
                          f"{format_duration(window)}{past} (allowing {allowed}): expired keys "
                          "are not removed", (observation.index,), mechanism="expired-keys-kept")

"""P1-P11, one function each, over a ``View`` of one history.

Each function explains in plain words what a person would see: which attempt got what, what the
ledger holds, and why that breaks the property.  Ids and meanings are those of
../shared/DESIGN.md; the classes (safety or conformance) follow from the ids.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from harness._analysis import Attempt, EffectsSeen, Identity, View, describe_identity
from harness._checker import CheckOptions, Inconclusive, prop
from harness._client import is_final
from harness._durations import format_duration
from harness._findings import Finding, Note
from harness._history import Event

__all__: list[str] = []

DRAFT_MISSING_KEY = 400
DRAFT_MISMATCH = 422
DRAFT_IN_PROGRESS = 409
#: Seconds of slack for a lease: the target's lease clock and ours are not the same clock.
LEASE_SLACK = 2.0


def _effects(view: View, identity: Identity) -> EffectsSeen:
    seen = view.effects.get(identity)
    if seen is None or seen.count is None:
        reason = seen.error if seen and seen.error else "no effects were recorded"
        raise Inconclusive(f"side effects of {describe_identity(identity)} unknown: {reason}")
    return seen


def _story(attempts: list[Attempt], view: View) -> str:
    """``attempt 1: no answer (timeout) during response-timeout; attempt 2: 201 (ch_2)``."""
    parts = []
    for attempt in attempts:
        faults = view.faults_during(attempt)
        during = f" during {', '.join(faults)}" if faults else ""
        parts.append(attempt.describe() + during)
    return "; ".join(parts)


def _same_response(a: Attempt, b: Attempt) -> bool:
    return (a.status, a.digest, a.header("location")) == (b.status, b.digest, b.header("location"))


@prop("P1", "at most one side effect per (tenant, key)")
def at_most_once(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    retention = options.promises.retention
    for identity, attempts in view.keyed():
        effects = _effects(view, identity)
        allowed = len(view.epochs(attempts, retention))
        shown = describe_identity(identity)
        if effects.count is not None and effects.count > allowed:
            expiry = "" if allowed == 1 else f" ({allowed} retention windows)"
            yield Finding(
                "P1", shown,
                f"{effects.count} charges for key {shown} where at most {allowed} may exist"
                f"{expiry}: {_story(attempts, view)}. A retry was executed again instead of "
                "being answered from the stored response.",
                view.evidence(attempts, effects.index),
            )
        elif allowed > 1 and effects.count and effects.count > 1:
            yield Note("P1", shown,
                       f"{effects.count} charges for key {shown}: a retry came after the promised "
                       f"retention ({format_duration(retention or 0)}) and was executed as new, "
                       "which the contract allows")


@prop("P2", "no lost outcome: a 2xx key has exactly one effect, and every 2xx names it")
def no_lost_outcome(view: View, options: CheckOptions) -> Iterator[Finding]:
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        epochs = view.epochs(attempts, options.promises.retention)
        if len(epochs) == 1:
            yield from _charged_behind_an_error(view, shown, identity, attempts, options)
        for epoch in epochs:
            successes = [a for a in epoch if a.ok]
            if not successes:
                continue
            effects = _effects(view, identity)
            resources = sorted({a.resource for a in successes if a.resource})
            if len(resources) > 1:
                yield Finding(
                    "P2", shown,
                    f"successful answers for key {shown} name {len(resources)} different "
                    f"resources ({', '.join(resources)}): {_story(epoch, view)}. The client "
                    "cannot tell which charge is real.",
                    view.evidence(successes, effects.index),
                )
            if effects.count == 0:
                yield Finding(
                    "P2", shown,
                    f"key {shown} was answered {successes[0].status} but nothing was charged: "
                    "the client was told it succeeded and the outcome is lost "
                    f"({_story(epoch, view)})",
                    view.evidence(successes, effects.index),
                )
            elif effects.ids is not None:
                ghosts = [r for r in resources if r not in effects.ids]
                if ghosts:
                    yield Finding(
                        "P2", shown,
                        f"key {shown} was answered with {', '.join(ghosts)}, which the ledger "
                        f"does not hold (it holds {', '.join(effects.ids) or 'nothing'})",
                        view.evidence(successes, effects.index),
                    )


def _charged_behind_an_error(view: View, shown: str, identity: Identity,
                             attempts: list[Attempt], options: CheckOptions) -> Iterator[Finding]:
    """A key whose final answer was an error (a stored 5xx, a 4xx) must have charged nothing:
    the client was told the charge failed and will never look for it."""
    answered = [a.completion for a in attempts if a.completion and a.status is not None]
    if not answered or any(a.ok for a in attempts):
        return
    last = answered[-1]
    refused = last.status in (options.promises.mismatch_status, DRAFT_MISSING_KEY)
    if refused or not is_final(last, options.promises):
        return
    effects = _effects(view, identity)
    if effects.count:
        yield Finding(
            "P2", shown,
            f"key {shown} ended with {last.status} but {effects.count} charge(s) exist: the "
            f"client was told the charge failed and its outcome is lost ({_story(attempts, view)})",
            view.evidence(attempts, effects.index),
        )


@prop("P3", "faithful replay of status, body and meaningful headers")
def faithful_replay(view: View, options: CheckOptions) -> Iterator[Finding]:
    promises = options.promises
    marker = promises.replay_header
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        first = attempts[0]
        if (marker and first.ok and first.invoke.attempt == 1 and first.header(marker)
                and not any(a is not first and a.invoke.time < first.end_time for a in attempts)):
            yield Finding("P3", shown,
                          f"the first request for key {shown} was answered as a replay "
                          f"({marker}: {first.header(marker)}) although nothing was stored yet",
                          view.evidence([first]))
        for epoch in view.epochs(attempts, promises.retention):
            groups: dict[str | None, list[Attempt]] = defaultdict(list)
            for attempt in epoch:
                if attempt.completion is not None and is_final(attempt.completion, promises):
                    groups[attempt.invoke.fingerprint].append(attempt)
            reference_fp = epoch[0].invoke.fingerprint
            for fingerprint, finals in groups.items():
                if fingerprint != reference_fp or len(finals) < 2:
                    continue
                yield from _replays_match(view, shown, finals, marker)


def _replays_match(view: View, shown: str, finals: list[Attempt],
                   marker: str | None) -> Iterator[Finding]:
    """Compare every final answer with the original one.  Concurrent copies complete in any
    order, so the original is the one not marked as a replay (when the target marks them),
    else the first to complete."""
    unmarked = [a for a in finals if not (marker and a.header(marker))]
    reference = min(unmarked or finals, key=lambda a: a.end_time)
    for replay in (a for a in finals if a is not reference):
        if replay.resource and reference.resource and replay.resource != reference.resource:
            continue  # executed again, not replayed: P1 and P2 say so
        if not _same_response(reference, replay):
            yield Finding(
                "P3", shown,
                f"the retry of key {shown} got {_response_difference(reference, replay)}: the "
                "stored response was not replayed faithfully",
                view.evidence([reference, replay]),
            )
        elif marker and not replay.header(marker):
            yield Finding(
                "P3", shown,
                f"the replay for key {shown} lacks the promised {marker} header",
                view.evidence([replay]),
            )
        elif replay.header("content-type") != reference.header("content-type"):
            yield Finding(
                "P3", shown,
                f"the replay for key {shown} changed Content-Type from "
                f"{reference.header('content-type')} to {replay.header('content-type')}",
                view.evidence([reference, replay]),
            )


def _response_difference(reference: Attempt, replay: Attempt) -> str:
    """What differs between an original answer and its replay, in the reader's terms."""
    if replay.status != reference.status:
        return f"{replay.status} where the original answer was {reference.status}"
    if replay.digest != reference.digest:
        return (f"another body ({_excerpt(replay)}) where the original was "
                f"{_excerpt(reference)}")
    return (f"Location {replay.header('location')!r} where the original had "
            f"{reference.header('location')!r}")


def _excerpt(attempt: Attempt, length: int = 60) -> str:
    body = attempt.completion.body if attempt.completion and attempt.completion.body else ""
    return repr(body[:length] + ("…" if len(body) > length else ""))


@prop("P4", "a reused key with a different request is rejected; an equal JSON body is not")
def reuse_rejected(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    promises = options.promises
    mismatch = promises.mismatch_status
    transient = {promises.in_progress_status, 429, 503}
    if mismatch != DRAFT_MISMATCH and any(a.invoke.fingerprint for a in view.attempts):
        yield Note("P4", None, f"the target promises {mismatch} for a reused key where the "
                               f"IETF draft says {DRAFT_MISMATCH}")
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        for epoch in view.epochs(attempts, promises.retention):
            original = epoch[0]
            for attempt in epoch[1:]:
                status = attempt.status
                if status is None or status in transient:
                    continue
                same = attempt.invoke.fingerprint == original.invoke.fingerprint
                if same and status == mismatch:
                    yield Finding(
                        "P4", shown,
                        f"a retry of key {shown} with the same request (equal JSON, perhaps "
                        f"other key order or whitespace) was refused with {status} as if it "
                        "were a different request",
                        view.evidence([original, attempt]),
                    )
                elif not same and status != mismatch:
                    what = _answer_to_reuse(original, attempt)
                    yield Finding(
                        "P4", shown,
                        f"key {shown} reused with {_difference(original, attempt)} got {what} "
                        f"instead of {mismatch}"
                        + (": the client believes its second request happened" if attempt.ok
                           else ""),
                        view.evidence([original, attempt]),
                    )


def _answer_to_reuse(original: Attempt, reuse: Attempt) -> str:
    if not reuse.ok:
        return f"status {reuse.status}"
    if reuse.resource is not None and reuse.resource == original.resource:
        return f"the original's response ({reuse.status}, {reuse.resource})"
    return f"a new execution ({reuse.status}, {reuse.resource or 'no resource'})"


def _difference(original: Attempt, reuse: Attempt) -> str:
    """What makes ``reuse`` a different request: its method, its path or its body."""
    first, second = original.invoke, reuse.invoke
    if first.method != second.method:
        return f"another method ({second.method} instead of {first.method})"
    if first.path != second.path:
        return f"another path ({second.path} instead of {first.path})"
    return "another body"


@prop("P5", "a retry while the original runs gets 409 (or waits for the replay)")
def in_flight_retry(view: View, options: CheckOptions) -> Iterator[Finding]:
    promises = options.promises
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        for later in attempts:
            earlier = [
                a for a in attempts
                if a.invoke.time < later.invoke.time < a.end_time
                and a.invoke.fingerprint == later.invoke.fingerprint
                and not any(a.invoke.time <= c.time <= later.invoke.time for c in view.crashes)
            ]
            if not earlier or later.status is None:
                continue
            status = later.status
            if status == promises.in_progress_status:
                yield from _in_progress_answer(view, shown, later, options)
                continue
            replayed = any(_same_response(later, a) for a in attempts if a is not later)
            if status in (429, 503) or later.ok or replayed:
                continue  # transient, or a replay; a second execution is P1's and P2's to judge
            expected = f"{promises.in_progress_status}" + (
                " or a wait and the replay" if promises.in_progress == "wait" else "")
            yield Finding(
                "P5", shown,
                f"a retry of key {shown} sent while attempt {earlier[0].invoke.attempt} was "
                f"still running got {status}; expected {expected}",
                view.evidence([earlier[0], later]),
            )


def _in_progress_answer(view: View, shown: str, later: Attempt,
                        options: CheckOptions) -> Iterator[Finding]:
    promises = options.promises
    if promises.in_progress == "conflict":
        if promises.retry_after and not later.header("retry-after"):
            yield Finding("P5", shown,
                          f"the in-flight retry of key {shown} got {later.status} without the "
                          "promised Retry-After header", view.evidence([later]))
    elif promises.wait_timeout and later.end_time - later.invoke.time < promises.wait_timeout / 2:
        yield Finding("P5", shown,
                      f"the target promises to wait for an in-flight key but answered "
                      f"{later.status} at once for key {shown}", view.evidence([later]))


@prop("P6", "retention: replayed within the window, measured, and long enough for clients")
def retention(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    promised = options.promises.retention
    if not view.has_clock_advance:
        return
    if promised is not None and promised < options.retry_horizon:
        yield Finding("P6", None,
                      f"the promised retention ({format_duration(promised)}) is shorter than the "
                      f"client's retry horizon ({format_duration(options.retry_horizon)}): a "
                      "client retrying that late is charged twice")
    kept: list[float] = []
    forgotten: list[tuple[float, Attempt, Attempt]] = []
    for _identity, attempts in view.keyed():
        reference = next((a for a in attempts if a.ok), None)
        if reference is None:
            continue
        for probe in attempts:
            if not probe.label.startswith("retention-probe") or not probe.ok:
                continue
            gap = probe.start - attempts[0].start
            if probe.resource == reference.resource and probe.digest == reference.digest:
                kept.append(gap)
            else:
                forgotten.append((gap, reference, probe))
    if not kept and not forgotten:
        return
    low = max(kept, default=0.0)
    high = min((g for g, _, _ in forgotten), default=None)
    bracket = (f"between {format_duration(low)} and {format_duration(high)}" if high is not None
               else f"at least {format_duration(low)}")
    yield Note("P6", None, f"effective retention measured {bracket}",
               {"kept_at_least": low, "forgotten_by": high, "promised": promised})
    if promised is not None:
        for gap, reference, probe in forgotten:
            if gap <= promised:
                shown = describe_identity(probe.identity)
                yield Finding(
                    "P6", shown,
                    f"key {shown} was forgotten after {format_duration(gap)}, within the promised "
                    f"retention of {format_duration(promised)}: its retry was executed again",
                    view.evidence([reference, probe]),
                )


@prop("P7", "a missing key is rejected with 400 in strict mode and processed in lax mode")
def missing_key(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    strict = options.promises.mode == "strict"
    keyless: dict[str | None, list[Attempt]] = defaultdict(list)
    for attempt in view.attempts:
        if attempt.invoke.key is None and attempt.invoke.key_header is None and attempt.answered:
            keyless[attempt.invoke.tenant].append(attempt)
    for tenant, attempts in keyless.items():
        effects = _effects(view, (tenant, None))
        for attempt in attempts:
            status = attempt.status
            if strict and status != DRAFT_MISSING_KEY:
                yield Finding("P7", None,
                              f"a request without a key got {status}; in strict mode it must be "
                              f"rejected with {DRAFT_MISSING_KEY}", view.evidence([attempt]))
            elif not strict and not attempt.ok:
                yield Finding("P7", None,
                              f"a request without a key got {status}; in lax mode it must be "
                              "processed normally", view.evidence([attempt]))
        processed = sum(1 for a in attempts if a.ok)
        expected = 0 if strict else processed
        if effects.count != expected:
            yield Finding("P7", None,
                          f"{effects.count} charges from {len(attempts)} requests without a key "
                          f"where {expected} were expected ({options.promises.mode} mode)",
                          view.evidence(attempts, effects.index))


@prop("P8", "tenant isolation: one key in two tenants is two operations, no shared responses")
def tenant_isolation(view: View, options: CheckOptions) -> Iterator[Finding]:
    by_key: dict[str, list[Identity]] = defaultdict(list)
    for identity, _ in view.keyed():
        if identity[0] is not None and identity[1] is not None:
            by_key[identity[1]].append(identity)
    for identities in by_key.values():
        if len(identities) < 2:
            continue
        for identity in identities:
            attempts = view.by_identity[identity]
            shown = describe_identity(identity)
            own = _effects(view, identity)
            others = [i for i in identities if i != identity]
            first = attempts[0]
            evidence = view.evidence(
                [a for i in identities for a in view.by_identity[i]], own.index
            )
            if first.status == options.promises.mismatch_status:
                yield Finding("P8", shown,
                              f"{shown} was refused with {first.status} on its first request "
                              "because another tenant had used the same key: keys are not "
                              "scoped per tenant", evidence)
            for attempt in (a for a in attempts if a.ok):
                if attempt.resource and own.ids and attempt.resource in own.ids:
                    continue  # its own charge
                sources = _leak_sources(view, attempt, others)
                if sources or own.count == 0:
                    source = ", ".join(sources) or "another tenant"
                    yield Finding("P8", shown,
                                  f"{shown} received the stored response of {source} "
                                  f"({attempt.status}, {attempt.resource}); its own request was "
                                  f"never executed ({own.count} charges)", evidence)
                    break


def _leak_sources(view: View, attempt: Attempt, others: list[Identity]) -> list[str]:
    """The other tenants whose response ``attempt`` received: the same body naming a resource
    (a generic body such as "already processed" proves nothing), or their charge."""
    sources = []
    for other in others:
        same_body = attempt.resource is not None and any(
            attempt.digest == b.digest for b in view.by_identity[other] if b.ok)
        seen = view.effects.get(other)
        their_charge = bool(attempt.resource and seen and seen.ids
                            and attempt.resource in seen.ids)
        if same_body or their_charge:
            sources.append(describe_identity(other))
    return sources


@dataclass(frozen=True, slots=True)
class _Incident:
    """A failure on the server's side: the process died, or its store failed for a while."""

    what: str
    start: Event
    end: Event
    affected: frozenset[Identity]


def _incidents(view: View) -> list[_Incident]:
    """Crashes affect the requests they cut off; a store fault every request it overlapped."""
    incidents = []
    boundary = 0.0
    for crash in view.crashes:
        cut_off = frozenset(
            a.identity for a in view.attempts
            if a.invoke.time < crash.time and a.invoke.key is not None
            and (a.completion is None or (a.completion.type == "info"
                                          and a.completion.time >= boundary))
        )
        boundary = crash.time
        incidents.append(_Incident("the crash", crash, crash, cut_off))
    for fault, heal in view.fault_windows:
        if fault.value.get("where") != "store":
            continue
        end = heal or view.events[-1]
        overlapped = frozenset(
            a.identity for a in view.attempts
            if a.invoke.key is not None and a.invoke.time <= end.time
            and a.end_time >= fault.time
        )
        incidents.append(_Incident(f"the store fault ({fault.value.get('fault')})", fault, end,
                                   overlapped))
    return incidents


@prop("P9", "crash safety: after a crash or a store outage, retries converge to one effect and "
            "no key is stuck")
def crash_safety(view: View, options: CheckOptions) -> Iterator[Finding]:
    for incident in _incidents(view):
        if incident.start is not incident.end:
            yield from _answers_during_outage(view, incident, options)
        for identity in sorted(incident.affected, key=describe_identity):
            yield from _converged(view, incident, identity, options)


def _answers_during_outage(view: View, incident: _Incident,
                           options: CheckOptions) -> Iterator[Finding]:
    """While its store fails a server may only answer 2xx, a replay, 409 or 503: anything
    else means it did not notice the failure, and may have half-written."""
    allowed = {options.promises.in_progress_status, 503, 429}
    for attempt in view.attempts:
        status = attempt.status
        during = (attempt.invoke.time <= incident.end.time
                  and attempt.end_time >= incident.start.time)
        if during and status is not None and status >= 500 and status not in allowed:
            shown = describe_identity(attempt.identity)
            yield Finding("P9", shown,
                          f"during {incident.what} key {shown} got {status}; a server that loses "
                          "its store must answer 503 (or 409, or the stored response)",
                          view.evidence([attempt], incident.start.index, incident.end.index))


def _converged(view: View, incident: _Incident, identity: Identity,
               options: CheckOptions) -> Iterator[Finding]:
    promises = options.promises
    attempts = view.by_identity[identity]
    after = [a for a in attempts if a.invoke.time > incident.end.time]
    shown = describe_identity(identity)
    evidence = view.evidence(attempts, incident.start.index, incident.end.index)
    healed_at = view.target_time(incident.end)
    if promises.lease is not None:
        stuck = [a for a in after if a.status == promises.in_progress_status
                 and a.start > healed_at + promises.lease + LEASE_SLACK]
        if stuck:
            late = stuck[-1].start - healed_at
            yield Finding("P9", shown,
                          f"key {shown} was still in progress {format_duration(late)} after "
                          f"{incident.what}, past the promised lease of "
                          f"{format_duration(promises.lease)}: it is stuck for good", evidence)
            return
    finals = [a for a in after if a.completion and is_final(a.completion, promises)]
    if after and not finals:
        yield Finding("P9", shown,
                      f"after {incident.what}, {len(after)} retries of key {shown} never got an "
                      f"answer ({_story(after, view)})", evidence)
        return
    if any(a.ok for a in attempts):
        effects = _effects(view, identity)
        if effects.count != 1:
            yield Finding("P9", shown,
                          f"after {incident.what}, key {shown} ended with {effects.count} "
                          f"charges instead of exactly one ({_story(attempts, view)})",
                          view.evidence(attempts, incident.start.index, incident.end.index,
                                        effects.index))


@prop("P10", "bad input gets a 4xx, causes no effect, and the server keeps serving")
def bad_input(view: View, options: CheckOptions) -> Iterator[Finding]:
    hostile = [a for a in view.attempts if a.label.startswith("hostile")]
    for attempt in hostile:
        what = attempt.label.removeprefix("hostile:")
        if attempt.status is None or attempt.status >= 500:
            yield Finding("P10", None,
                          f"hostile input ({what}) made the target fail: {attempt.describe()}",
                          view.evidence([attempt]))
        elif attempt.status < 400:
            yield Finding("P10", None,
                          f"hostile input ({what}) was accepted with {attempt.status}; it must "
                          "be refused with a 4xx", view.evidence([attempt]))
        seen = view.effects.get(attempt.identity)
        if seen is not None and seen.count:
            yield Finding("P10", None, f"hostile input ({what}) caused {seen.count} charge(s)",
                          view.evidence([attempt], seen.index))
    if hostile:
        last_hostile = max(a.invoke.time for a in hostile)
        for control in view.attempts:
            if control.label == "control" and control.invoke.time > last_hostile and not control.ok:
                yield Finding("P10", None,
                              f"after the hostile requests an ordinary request got "
                              f"{control.status or 'no answer'}: the target stopped serving",
                              view.evidence([control]))
    marker = options.promises.replay_header
    for fake in (a for a in view.attempts if a.label == "fake-replay"):
        effects = _effects(view, fake.identity)
        if not fake.ok or effects.count != 1 or (marker and fake.header(marker)):
            yield Finding("P10", describe_identity(fake.identity),
                          "a new request that carried a forged replay header was not processed "
                          f"as new: {fake.describe()}, {effects.count} charge(s)",
                          view.evidence([fake], effects.index))


@prop("P11", "bounded storage: expired keys are removed")
def bounded_storage(view: View, options: CheckOptions) -> Iterator[Finding]:
    retention = options.promises.retention
    if not view.store_sizes or retention is None:
        return
    grace = options.promises.cleanup_interval or 0.0
    if not view.events:
        return
    start = view.target_time(view.events[0])
    first_use = {identity: attempts[0].start for identity, attempts in view.by_identity.items()
                 if identity[1] is not None}
    for observation in view.store_sizes:
        now = view.target_time(observation)
        if now < start + retention + grace:
            continue
        live = sum(1 for t in first_use.values() if t > now - retention - grace)
        rows = int(observation.value.get("rows", 0))
        if rows > live:
            yield Finding("P11", None,
                          f"the key table holds {rows} rows {format_duration(now - start)} into "
                          f"the run, but only {live} keys are within the retention of "
                          f"{format_duration(retention)}: expired keys are not removed and the "
                          "table grows without bound", (observation.index,))

"""P1-P11, one function each, over a ``View`` of one history.

Each function explains in plain words what a person would see: which attempt got what, what the
ledger holds, and why that breaks the property.  Ids and meanings are those of
../shared/DESIGN.md; the classes (safety or conformance) follow from the ids.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from harness._durations import format_duration
from harness._history import Event
from harness._target import LEASE_SLACK, ErrorPolicy, split_route
from harness.judging._analysis import (
    COPIES_MET,
    Attempt,
    EffectsSeen,
    Identity,
    View,
    copies_met,
    describe_identity,
    is_final,
    past_the_lease,
)
from harness.judging._checker import PROPERTIES, CheckOptions, Inconclusive, prop
from harness.judging._findings import Finding, Note

__all__: list[str] = []

DRAFT_MISSING_KEY = 400
DRAFT_MISMATCH = 422
DRAFT_IN_PROGRESS = 409


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


def _errors(attempts: list[Attempt], options: CheckOptions) -> ErrorPolicy:
    """The error policy the key is judged under (a handler fault may have its own)."""
    return options.errors_for(a.label for a in attempts)


def _final(view: View, attempt: Attempt, errors: ErrorPolicy, options: CheckOptions) -> bool:
    """A final answer for a key judged under ``errors``: one a client stops retrying on, and
    a stored error replayed (marked as such), whatever its status; never an error the failing
    store caused."""
    completion = attempt.completion
    if completion is None or view.store_failed(attempt):
        return False
    stored_error = (errors == "store" and attempt.status is not None and attempt.status >= 500
                    and options.promises.marks_replay(attempt.headers))
    return stored_error or is_final(completion, options.promises, errors=errors)


def _same_response(a: Attempt, b: Attempt) -> bool:
    return (a.status, a.digest, a.header("location")) == (b.status, b.digest, b.header("location"))


@PROPERTIES.exercises
def exercised(view: View, options: CheckOptions) -> frozenset[str]:
    """The properties a history gave something to judge: P1 and P2 any keyed request; P3 a
    key sent more than once; P4 a key sent with another request; P5 two requests of a key at
    once; P6 a clock jump; P7 a request without a key; P8 a key in two tenants; P9 a crash, a
    store fault or a failing handler; P10 hostile input (or a service that exited); P11 a
    reading of the key table."""
    keyed = view.keyed()
    used: set[str] = {"P1", "P2"} if keyed else set()
    if any(len(attempts) > 1 for _, attempts in keyed):
        used.add("P3")
    if any(len({a.invoke.fingerprint for a in attempts}) > 1 for _, attempts in keyed):
        used.add("P4")
    if any(b.invoke.time < a.end_time for _, attempts in keyed
           for a, b in pairwise(attempts)):
        used.add("P5")
    if view.has_clock_advance:
        used.add("P6")
    if any(a.invoke.key is None and a.invoke.key_header is None for a in view.attempts):
        used.add("P7")
    tenants_by_key: dict[str | None, set[str | None]] = defaultdict(set)
    for (tenant, key), _ in keyed:
        tenants_by_key[key].add(tenant)
    if any(len(tenants) > 1 for key, tenants in tenants_by_key.items() if key is not None):
        used.add("P8")
    if _incidents(view):
        used.add("P9")
    if view.exits or any(a.label.startswith("hostile") or a.label == "fake-replay"
                         for a in view.attempts):
        used.add("P10")
    if view.store_sizes:
        used.add("P11")
    return frozenset(used)


@prop("P1", "at most one side effect per (tenant, key)")
def at_most_once(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    retention = options.promises.retention
    for identity, attempts in view.keyed():
        effects = _effects(view, identity)
        allowed = len(view.epochs(attempts, retention))
        shown = describe_identity(identity)
        answered = {a.resource for a in attempts if a.ok and a.resource}
        if effects.count is not None and effects.ids is None and effects.count < len(answered):
            yield Note("P1", shown,
                       f"the effects oracle counted {effects.count} charge(s) for key {shown}, "
                       f"but the service answered with {len(answered)} different resources: "
                       "the count cannot be trusted, so whether it charged twice is unknown",
                       undecided=True)
            continue
        if effects.count is not None and effects.count > allowed:
            expiry = "" if allowed == 1 else f" ({allowed} retention windows)"
            refused = _refused_reuses_that_charged(attempts, effects, options)
            mechanism, how = (("reuse-charged", _reuse_charged_words(refused, options))
                              if refused else
                              _how_it_ran_twice(view, attempts, options.promises.lease))
            yield Finding(
                "P1", shown,
                f"{effects.count} charges for key {shown}{_every_charge(effects, attempts)} "
                f"where at most {allowed} may exist{expiry}: {_story(attempts, view)}. {how}",
                view.evidence(attempts, effects.index), mechanism=mechanism,
            )
        elif (allowed > 1 and effects.count and effects.count > 1
              and view.spans_lost_clock(view.evidence(attempts))):
            yield Note("P1", shown,
                       f"{effects.count} charges for key {shown}, a retry having come after the "
                       f"promised retention ({format_duration(retention or 0)}) by the harness's "
                       "account, which the contract allows; whether it had by the target's "
                       f"clock is unknown: {view.lost_clock_reason()}", undecided=True)
        elif allowed > 1 and effects.count and effects.count > 1:
            yield Note("P1", shown,
                       f"{effects.count} charges for key {shown}: a retry came after the promised "
                       f"retention ({format_duration(retention or 0)}) and was executed as new, "
                       "which the contract allows")
    yield from _copies_never_met(view, options)


def _copies_never_met(view: View, options: CheckOptions) -> Iterator[Note]:
    """Bursts of copies a scenario sent to meet at the server (one group: bursts with fresh
    keys, sent until one met) whose answers never showed that two ran at the same time.  One
    charge then proves nothing about the claim: where the copies were slowed by the target's
    slow hook, so they could have met, P1 is undecided, never a pass; without one (a fast
    handler is over before the next copy arrives) a note says the claim was not tested."""
    groups: dict[str, list[Event]] = defaultdict(list)
    for intent in view.events:
        if intent.f == "intent" and intent.value.get("what") == COPIES_MET:
            groups[str(intent.value.get("group", intent.key))].append(intent)
    for group, intents in groups.items():
        if any(_met(view, intent, options) for intent in intents):
            continue
        last = intents[-1]
        slowed = any(intent.value.get("slowed") for intent in intents)
        hint = "" if slowed else (" (the target has no slow hook, [hooks.slow], with which "
                                  "the harness could make them meet)")
        yield Note("P1", describe_identity((last.tenant, last.key)),
                   f"{group}: the copies of {len(intents)} burst(s) never showed that two ran "
                   "at the same time (none was told the key was in progress, and one charge "
                   "was replayed to the others, each perhaps sent after the one before had "
                   "finished), so whether the key is claimed atomically is unknown" + hint,
                   undecided=slowed)


def _met(view: View, intent: Event, options: CheckOptions) -> bool:
    """Did the intent's copies show, by their answers, that they met?  Not by the key's charge
    count: an expired key's earlier window holds a charge of its own."""
    label = intent.value.get("label")
    copies = [a.completion for a in view.by_identity.get((intent.tenant, intent.key), [])
              if a.completion is not None and (label is None or a.label == label)]
    return copies_met(copies, options.promises)


def _every_charge(effects: EffectsSeen, attempts: list[Attempt]) -> str:
    """`` (ch_1, ch_2; no answer named ch_2)``: every charge the oracle names for the key, and
    which of them no answer ever named (made by an attempt whose answer was lost)."""
    if not effects.ids:
        return ""
    named = {a.resource for a in attempts if a.resource}
    unnamed = [charge for charge in effects.ids if charge not in named]
    silent = f"; no answer named {', '.join(unnamed)}" if unnamed else ""
    return f" ({', '.join(effects.ids)}{silent})"


def _refused_reuses_that_charged(attempts: list[Attempt], effects: EffectsSeen,
                                 options: CheckOptions) -> list[Attempt]:
    """The requests reusing the key with another request, refused with the mismatch status,
    that must have made the charges no answer names: each charge that a 2xx names is that
    answer's, and every request of the key that could have made another (none was answered
    with a 2xx naming a charge) is such a refused reuse.  Empty when anything else could have
    charged (an answer lost, an error, an in-progress answer): then nothing is blamed."""
    promises = options.promises
    named = {a.resource for a in attempts if a.ok and a.resource}
    if effects.count is None or not named or effects.count <= len(named):
        return []
    if effects.ids is not None and not set(effects.ids) - named:
        return []
    first = next(a for a in attempts if a.ok and a.resource)
    others = [a for a in attempts if not (a.ok and a.resource)]
    refused = [a for a in others if a.status == promises.mismatch_status
               and a.invoke.fingerprint != first.invoke.fingerprint
               and not promises.says_in_progress(a.status)]
    return refused if others and len(refused) == len(others) else []


def _reuse_charged_words(refused: list[Attempt], options: CheckOptions) -> str:
    status = options.promises.mismatch_status
    which = ", ".join(f"attempt {a.invoke.attempt or '?'}" for a in refused)
    return (f"The key was reused with another request ({which}), refused with {status} as it "
            f"should be, yet charged: no answer names the extra charge, and only the refused "
            f"reuse could have made it. A refusal must come before any work.")


def _how_it_ran_twice(view: View, attempts: list[Attempt],
                      lease: float | None) -> tuple[str, str]:
    """Why a key was charged more than once, told from the evidence alone, as a mechanism and
    its words: copies that ran at the same time, a late original that committed after a retry
    took its expired lease over, a retry that ran after an answer was stored, or a request the
    server died in and ran again; silent about what the history cannot show."""
    executed = [a for a in attempts if a.ok and a.resource]
    resources = {a.resource for a in executed}
    if len(resources) > 1:
        first_of = {r: min((a for a in executed if a.resource == r), key=lambda a: a.start)
                    for r in resources}
        runs = sorted(first_of.values(), key=lambda a: a.start)
        if lease is not None and any(
                b.invoke.time < a.end_time and b.start - a.start > lease
                and b.end_time < a.end_time for a, b in pairwise(runs)):
            return ("late-original-after-takeover",
                    "The original was still running past its lease of "
                    f"{format_duration(lease)}: a retry took the key over and charged, then "
                    "the late original committed its own charge too; its commit did not check "
                    "that the claim was still its own.")
        if any(b.invoke.time < a.end_time for a, b in pairwise(runs)):
            return ("concurrent-copies",
                    "Copies of the request that ran at the same time were each executed: the "
                    "key was not claimed atomically before the work began.")
        return ("retry-after-answer",
                "A retry that came after the first charge was answered was executed again "
                "instead of being answered from the stored response.")
    if any(view.ran_on_the_server_until(a) < float("inf") for a in attempts if not a.answered):
        return ("rerun-after-crash",
                "The request was run again after the server died in it, although its first "
                "run had already charged.")
    overlapping = any(b.invoke.time < a.end_time
                      for position, a in enumerate(attempts) for b in attempts[position + 1:])
    if overlapping:
        return ("overlapping-requests",
                "Requests with this key ran at the same time and more than one of them charged.")
    return ("retry-executed-again",
            "A retry was executed again instead of being answered from the stored response.")


@prop("P2", "no lost outcome: a key answered 2xx was charged, every 2xx names the same charge, "
            "and a key answered with an error charged nothing")
def no_lost_outcome(view: View, options: CheckOptions) -> Iterator[Finding]:
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        epochs = view.epochs(attempts, options.promises.retention)
        if len(epochs) == 1:
            yield from _charged_behind_an_error(view, shown, identity, attempts, options)
        for number, epoch in enumerate(epochs):
            successes = [a for a in epoch if a.ok]
            if not successes:
                continue
            effects = _effects(view, identity)
            # An answer that came after the next window began may be that window's (a late
            # original answered with the replay of what a retry executed after the retention):
            # only answers within one window are compared.
            closes = epochs[number + 1][0].start if number + 1 < len(epochs) else None
            pinned = [a for a in successes
                      if closes is None or (a.end is not None and a.end < closes)]
            resources = sorted({a.resource for a in pinned if a.resource})
            if len(resources) > 1:
                yield Finding(
                    "P2", shown,
                    f"successful answers for key {shown} name {len(resources)} different "
                    f"resources ({', '.join(resources)}): {_story(epoch, view)}. The client "
                    "cannot tell which charge is real.",
                    view.evidence(pinned, effects.index), mechanism="answers-name-two-charges",
                )
            if effects.count == 0 and any(a.completion is None for a in attempts):
                continue  # a request of the key still runs: its charge may yet land
            if effects.count == 0 and _spelled_otherwise(identity):
                raise Inconclusive(
                    f"key {shown} was answered {successes[0].status} but the effects oracle "
                    "finds no charge under it: the key has characters outside ASCII (which a "
                    "server reading header bytes as latin-1 stores under another spelling) or "
                    "spaces around it (which HTTP may strip), so whether the outcome is lost "
                    "is unknown")
            if effects.count == 0:
                yield Finding(
                    "P2", shown,
                    f"key {shown} was answered {successes[0].status} but nothing was charged: "
                    "the client was told it succeeded and the outcome is lost "
                    f"({_story(epoch, view)})",
                    view.evidence(successes, effects.index), mechanism="answered-not-charged",
                )
            elif effects.ids is not None:
                ghosts = [r for r in resources if r not in effects.ids]
                if ghosts:
                    yield Finding(
                        "P2", shown,
                        f"key {shown} was answered with {', '.join(ghosts)}, which the ledger "
                        f"does not hold (it holds {', '.join(effects.ids) or 'nothing'})",
                        view.evidence(successes, effects.index),
                        mechanism="answer-names-unknown-charge",
                    )


def _spelled_otherwise(identity: Identity) -> bool:
    """Might the server hold this key under another spelling than the one sent?  Header values
    are bytes: WSGI, Starlette and Node decode them as latin-1, so a key with characters
    outside ASCII reaches the service (and its effects query) spelled otherwise; and HTTP
    strips the whitespace around a header value (RFC 9110 section 5.5), which some servers do
    and others do not."""
    key = identity[1] or ""
    return not key.isascii() or key != key.strip(" \t")


def _charged_behind_an_error(view: View, shown: str, identity: Identity,
                             attempts: list[Attempt], options: CheckOptions) -> Iterator[Finding]:
    """A key whose final answer was an error (a stored 5xx, a 4xx) must have charged nothing:
    the client was told the charge failed and will never look for it."""
    answered = [a for a in attempts if a.completion and a.status is not None]
    if not answered or any(a.ok for a in attempts):
        return
    last = answered[-1]
    refused = last.status in (options.promises.mismatch_status, DRAFT_MISSING_KEY)
    if refused or not _final(view, last, _errors(attempts, options), options):
        return
    effects = _effects(view, identity)
    if effects.count:
        yield Finding(
            "P2", shown,
            f"key {shown} ended with {last.status} but {effects.count} charge(s) exist: the "
            f"client was told the charge failed and its outcome is lost ({_story(attempts, view)})",
            view.evidence(attempts, effects.index), mechanism="charged-behind-an-error",
        )


def _stored_answer(view: View, attempt: Attempt, options: CheckOptions,
                   errors: ErrorPolicy) -> bool:
    """Is this final answer one the target promises to store and replay?  A 2xx always is; a
    5xx only when errors are stored (``errors``: the key's policy); a 4xx only when validation
    errors are declared stored (Stripe-style services answer a bad request again without
    storing it); a refusal of the key (the mismatch or in-progress status) is never a stored
    response."""
    status = attempt.status
    promises = options.promises
    if status is None:
        return False
    if 200 <= status < 300:
        return True
    if status >= 500:
        return errors == "store" and not view.store_failed(attempt)
    refusals = {promises.mismatch_status, *promises.in_progress_statuses}
    return status not in refusals and promises.validation_errors == "stored"


@prop("P3", "faithful replay of status, body and meaningful headers")
def faithful_replay(view: View, options: CheckOptions) -> Iterator[Finding]:
    promises = options.promises
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        yield from _released_error_replayed(view, shown, attempts, options)
        first = attempts[0]
        marked = promises.marks_replay(first.headers)
        # A server that lost its store's acknowledgement of its own commit may find the answer
        # it stored and replay it: something was stored, by this very request.
        if (marked and first.ok and first.invoke.attempt == 1
                and not view.faults_during(first, where="store")
                and not any(a is not first and a.invoke.time < first.end_time for a in attempts)):
            yield Finding("P3", shown,
                          f"the first request for key {shown} was answered as a replay "
                          f"({promises.replay_header}: {first.header(promises.replay_header or '')}"
                          ") although nothing was stored yet",
                          view.evidence([first]), mechanism="first-answer-marked-replay")
        errors = _errors(attempts, options)
        for epoch in view.epochs(attempts, promises.retention):
            groups: dict[str | None, list[Attempt]] = defaultdict(list)
            for attempt in epoch:
                if _final(view, attempt, errors, options):
                    groups[attempt.invoke.fingerprint].append(attempt)
            reference_fp = epoch[0].invoke.fingerprint
            for fingerprint, finals in groups.items():
                if fingerprint != reference_fp or len(finals) < 2:
                    continue
                yield from _replays_match(view, shown, finals, options, errors)


def _released_error_replayed(view: View, shown: str, attempts: list[Attempt],
                             options: CheckOptions) -> Iterator[Finding]:
    """With ``errors = "release"`` (the key's policy) a failed handler's 5xx is not stored: a
    retry must run again, not receive the same error (marked as a replay, or as the very next
    answer, whatever the later retries got)."""
    if _errors(attempts, options) != "release":
        return
    for failed in (a for a in attempts if a.label.startswith("handler:")):
        if failed.status is None or failed.status < 500:
            continue
        retries = [a for a in attempts if a.invoke.time > failed.end_time and a.answered]
        same = [a for a in retries if a.status == failed.status and a.digest == failed.digest]
        marked = [a for a in same if options.promises.marks_replay(a.headers)]
        if marked or (same and same[0] is retries[0]):
            yield Finding("P3", shown,
                          f"after the handler failed with {failed.status}, {len(same)} retries "
                          f"of key {shown} got the same {failed.status} back"
                          + (" marked as a replay" if marked else "")
                          + ": the target promises to release the key after this error "
                            "(errors = \"release\"), so a retry must run again",
                          view.evidence([failed, *same[:3]]), mechanism="released-error-replayed")
            return


def _replays_match(view: View, shown: str, finals: list[Attempt],
                   options: CheckOptions, errors: ErrorPolicy) -> Iterator[Finding]:
    """Compare every final answer with the original one.  Concurrent copies complete in any
    order, so the original is the one not marked as a replay (when the target marks them),
    else the first to complete.  Only an answer the target stores can be replayed: a refusal
    or an unstored 4xx answered twice is two fresh answers, not a replay."""
    promises = options.promises
    marker = promises.replay_header

    def marked(attempt: Attempt) -> bool:
        return promises.marks_replay(attempt.headers)

    unmarked = [a for a in finals if not marked(a)]
    reference = min(unmarked or finals, key=lambda a: a.end_time)
    if not _stored_answer(view, reference, options, errors):
        return
    for replay in (a for a in finals if a is not reference):
        if replay.resource and reference.resource and replay.resource != reference.resource:
            continue  # executed again, not replayed: P1 and P2 say so
        if not _same_response(reference, replay):
            what, difference = _response_difference(reference, replay)
            yield Finding(
                "P3", shown,
                f"the retry of key {shown} got {difference}: the stored response was not "
                "replayed faithfully",
                view.evidence([reference, replay]), mechanism=f"replay-{what}-differs",
            )
        elif marker and not marked(replay):
            seen = replay.header(marker)
            how = (f"{marker}: {seen} where the target promises {promises.replay_value!r}"
                   if seen is not None else f"no {marker} header")
            yield Finding(
                "P3", shown,
                f"the replay for key {shown} repeats the original answer but carries {how}, so "
                "the client cannot tell it is a replay",
                view.evidence([replay]), mechanism="replay-not-marked",
            )
        elif replay.header("content-type") != reference.header("content-type"):
            yield Finding(
                "P3", shown,
                f"the replay for key {shown} changed Content-Type from "
                f"{reference.header('content-type')} to {replay.header('content-type')}",
                view.evidence([reference, replay]), mechanism="replay-content-type-differs",
            )


def _response_difference(reference: Attempt, replay: Attempt) -> tuple[str, str]:
    """What differs between an original answer and its replay (``status``, ``body`` or
    ``location``), and how, in the reader's terms."""
    if replay.status != reference.status:
        return "status", f"{replay.status} where the original answer was {reference.status}"
    if replay.digest != reference.digest:
        return "body", (f"another body ({_excerpt(replay)}) where the original was "
                        f"{_excerpt(reference)}")
    return "location", (f"Location {replay.header('location')!r} where the original had "
                        f"{reference.header('location')!r}")


def _excerpt(attempt: Attempt, length: int = 60) -> str:
    body = attempt.completion.body if attempt.completion and attempt.completion.body else ""
    return repr(body[:length] + ("…" if len(body) > length else ""))


@prop("P4", "a reused key with a different request is rejected; an equal JSON body is not")
def reuse_rejected(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    promises = options.promises
    mismatch = promises.mismatch_status
    transient = {*promises.in_progress_statuses, 429, 503} - {mismatch}
    if mismatch != DRAFT_MISMATCH and any(a.invoke.fingerprint for a in view.attempts):
        yield Note("P4", None, f"the target promises {mismatch} for a reused key where the "
                               f"IETF draft says {DRAFT_MISMATCH}")
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        yield from _refused_as_a_reuse_at_once(view, identity, attempts, options)
        yield from _refused_reuse_charged(view, identity, attempts, options)
        errors = _errors(attempts, options)
        for epoch in view.epochs(attempts, promises.retention):
            # Reuse is judged against the first answer the target stored: before it (a lost
            # request, a refusal, a released error) the key may still be free.
            original = next((a for a in epoch if _stored_answer(view, a, options, errors)),
                            None)
            if original is None:
                continue
            for attempt in epoch:
                status = attempt.status
                if (attempt.invoke.time < original.end_time or status is None
                        or status in transient):
                    continue
                if view.store_failed(attempt):  # the failing store's error: no key was looked up
                    continue
                if not options.declares(attempt.invoke.method, attempt.invoke.path):
                    continue  # a route the target does not declare keyed proves nothing
                same = attempt.invoke.fingerprint == original.invoke.fingerprint
                if not same and not promises.query_in_fingerprint and _changes(
                        original, attempt) == ["query"]:
                    continue  # not a different request by the target's promise; P1 judges it
                ambiguous = promises.says_in_progress(mismatch)
                if same and status == mismatch and not ambiguous:
                    yield Finding(
                        "P4", shown,
                        f"a retry of key {shown} with the same request (equal JSON, perhaps "
                        f"other key order or whitespace) was refused with {status} as if it "
                        "were a different request",
                        view.evidence([original, attempt]), mechanism="same-request-refused",
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
                        mechanism=_reuse_mechanism(original, attempt),
                    )


def _refused_reuse_charged(view: View, identity: Identity, attempts: list[Attempt],
                           options: CheckOptions) -> Iterator[Finding]:
    """A reuse refused with the mismatch status must also cause no side effect: a charge no
    answer names, which only a refused reuse could have made, is one it caused (judged, as
    every reuse, only on the target's declared operations)."""
    seen = view.effects.get(identity)
    if seen is None or seen.count is None:
        return
    refused = _refused_reuses_that_charged(attempts, seen, options)
    if refused and all(options.declares(a.invoke.method, a.invoke.path) for a in refused):
        shown = describe_identity(identity)
        yield Finding("P4", shown,
                      f"key {shown} reused with another request was refused with "
                      f"{refused[0].status}, yet charged: {seen.count} charges where the "
                      f"answers name {len({a.resource for a in attempts if a.ok and a.resource})}"
                      ", and only the refused reuse could have made the other",
                      view.evidence([*attempts[:1], *refused], seen.index),
                      mechanism="reuse-refused-but-charged")


def _refused_as_a_reuse_at_once(view: View, identity: Identity, attempts: list[Attempt],
                                options: CheckOptions) -> Iterator[Finding]:
    """A key refused as reused on its very first request, with nothing else racing it: the
    server took it for another key (case folded, cut short, punctuation dropped).  Another
    tenant's use of the same key is P8's to judge."""
    promises = options.promises
    first = attempts[0]
    if (first.status != promises.mismatch_status
            or promises.says_in_progress(promises.mismatch_status)
            or any(a.invoke.time < first.end_time for a in attempts[1:])):
        return
    tenant, key = identity
    if key is None or any(i[1] == key and i[0] != tenant for i in view.by_identity):
        return
    earlier = [i[1] for i, a in view.by_identity.items()
               if i[0] == tenant and i[1] and i[1] != key and a[0].invoke.time < first.invoke.time]
    like = [k for k in earlier if _look_alike(k, key)]
    hint = f" (sent before it: {like[-1]!r})" if like else ""
    yield Finding("P4", describe_identity(identity),
                  f"key {describe_identity(identity)} was refused with {first.status} on its "
                  f"very first request, as if it reused another key{hint}: the server takes "
                  "two different keys for one", view.evidence([first]),
                  mechanism="two-keys-taken-for-one")


def _look_alike(one: str, other: str) -> bool:
    """Keys a careless store could merge: equal but for case or punctuation, or sharing a
    long prefix."""
    def folded(k: str) -> str:
        return "".join(c for c in k.lower() if c.isalnum())

    return folded(one) == folded(other) or (len(one) > 16 and one[:16] == other[:16])


def _changes(original: Attempt, reuse: Attempt) -> list[str]:
    """What differs between two requests, in the order a reader asks: method, operation
    (path), query string, body."""
    first, second = original.invoke, reuse.invoke
    one, other = split_route(first.method, first.path), split_route(second.method, second.path)
    return [what for what, a, b in zip(("method", "operation", "query"), one, other,
                                       strict=True) if a != b] + (
        ["body"] if first.body != second.body else [])


def _reuse_mechanism(original: Attempt, reuse: Attempt) -> str:
    """How a reuse went unrefused, and what it changed: answered with the original's response
    (the fingerprint left the change out), executed as a new operation (the key forgotten or
    not claimed), or answered another status; ``reuse-replayed:body``."""
    change = next(iter(_changes(original, reuse)), "body")
    if not reuse.ok:
        return f"reuse-answered-{reuse.status}:{change}"
    replayed = reuse.resource is not None and reuse.resource == original.resource
    return f"reuse-{'replayed' if replayed else 'executed'}:{change}"


def _answer_to_reuse(original: Attempt, reuse: Attempt) -> str:
    if not reuse.ok:
        return f"status {reuse.status}"
    if reuse.resource is not None and reuse.resource == original.resource:
        return f"the original's response ({reuse.status}, {reuse.resource})"
    return f"a new execution ({reuse.status}, {reuse.resource or 'no resource'})"


def _difference(original: Attempt, reuse: Attempt) -> str:
    """What makes ``reuse`` a different request, said the first way that applies."""
    first = split_route(original.invoke.method, original.invoke.path)
    second = split_route(reuse.invoke.method, reuse.invoke.path)
    change = next(iter(_changes(original, reuse)), "body")
    if change == "method":
        return f"another method ({second[0]} instead of {first[0]})"
    if change == "operation":
        return f"another operation ({second[0]} {second[1]} instead of {first[1]})"
    if change == "query":
        return f"another query string ({second[2] or 'none'} instead of {first[2] or 'none'})"
    return "another body"


@prop("P5", "a retry while the original runs gets 409 (or waits for the replay)")
def in_flight_retry(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    promises = options.promises
    statuses = sorted(promises.in_progress_statuses)
    if promises.in_progress == "conflict" and statuses != [DRAFT_IN_PROGRESS] \
            and any(promises.says_in_progress(a.status) for a in view.attempts):
        shown_statuses = " or ".join(str(s) for s in statuses)
        yield Note("P5", None, f"the target promises {shown_statuses} for a key still in "
                               f"progress where the IETF draft says {DRAFT_IN_PROGRESS}")
    for identity, attempts in view.keyed():
        shown = describe_identity(identity)
        for later in attempts:
            earlier = [
                a for a in attempts
                if a.invoke.time < later.invoke.time < a.end_time
                and a.invoke.fingerprint == later.invoke.fingerprint
                and not any(a.invoke.time <= c.time <= later.invoke.time for c in view.crashes)
                and _still_holds(view, a, later, options)
            ]
            if not earlier or later.status is None:
                continue
            status = later.status
            if promises.says_in_progress(status):
                yield from _in_progress_answer(view, shown, later, options)
                continue
            if status in (429, 503) or view.store_failed(later):
                continue  # transient, or the failing store's error: no key was looked up
            if later.ok:
                yield from _answered_before_the_original(view, shown, later, earlier[0], options)
                continue
            if any(_same_response(later, a) for a in attempts if a is not later):
                continue  # a replay; a second execution is P1's and P2's to judge
            expected = " or ".join(str(s) for s in statuses) + (
                " or a wait and the replay" if promises.in_progress == "wait" else "")
            yield Finding(
                "P5", shown,
                f"a retry of key {shown} sent while attempt {earlier[0].invoke.attempt} was "
                f"still running got {status}; expected {expected}",
                view.evidence([earlier[0], later]), mechanism="in-flight-wrong-status",
            )


def _still_holds(view: View, original: Attempt, retry: Attempt, options: CheckOptions) -> bool:
    """May ``original``, still running, hold its key when ``retry`` arrives?  Not once the
    retention has run out since it began (the key expired: another body may hold it now), nor
    past the promised lease (a retry may take the key over), unless the target renews the
    lease while the handler runs and only real time passed: a clock jump is not time its
    renewal timer saw."""
    promises = options.promises
    gap = retry.start - original.start
    if promises.retention is not None and gap > promises.retention:
        return False
    if not past_the_lease(promises.lease, since=original.start, at=retry.start):
        return True
    return promises.lease_renewed and not view.jumped_between(original.invoke.time,
                                                              retry.invoke.time)


def _answered_before_the_original(view: View, shown: str, retry: Attempt, original: Attempt,
                                  options: CheckOptions) -> Iterator[Finding]:
    """A 2xx to a retry while the original ran is right only as the original's own stored
    response (its answer was merely slow to arrive) or after a wait for it.  A 2xx that is
    neither, naming no other charge, was made up before the original finished: a
    placeholder the client takes for the outcome."""
    if not original.ok or retry.end_time >= original.end_time or _same_response(retry, original):
        return
    if retry.resource and original.resource and retry.resource != original.resource:
        return  # executed twice: P1 and P2 say so
    if retry.resource is not None and retry.resource == original.resource:
        return  # the stored answer, naming the original's own charge, merely arrived first
        # (under load): nothing was made up; how faithfully it was replayed is P3's
    marked = (" marked as a replay" if options.promises.marks_replay(retry.headers) else "")
    early = (original.end_time - retry.end_time) * 1000
    yield Finding(
        "P5", shown,
        f"a retry of key {shown} sent while attempt {original.invoke.attempt} was still running "
        f"got {retry.status} {_excerpt(retry)}{marked}, {early:.0f} ms before the original "
        f"answered {original.status} {_excerpt(original)}: an answer made up while the work "
        "was still running, not the stored response",
        view.evidence([original, retry]), mechanism="answer-made-up-while-running",
    )


def _in_progress_answer(view: View, shown: str, later: Attempt,
                        options: CheckOptions) -> Iterator[Finding]:
    promises = options.promises
    if promises.in_progress == "conflict":
        if promises.retry_after and not later.header("retry-after"):
            yield Finding("P5", shown,
                          f"the in-flight retry of key {shown} got {later.status} without the "
                          "promised Retry-After header", view.evidence([later]),
                          mechanism="no-retry-after")
    elif promises.wait_timeout and later.end_time - later.invoke.time < promises.wait_timeout / 2:
        yield Finding("P5", shown,
                      f"the target promises to wait for an in-flight key but answered "
                      f"{later.status} at once for key {shown}", view.evidence([later]),
                      mechanism="no-wait-for-in-flight")


@prop("P6", "retention: replayed within the window, measured, and long enough for clients")
def retention(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    promised = options.promises.retention
    if not view.has_clock_advance:
        return
    if promised is not None and promised < options.retry_horizon:
        yield Finding("P6", None,
                      f"the promised retention ({format_duration(promised)}) is shorter than the "
                      f"client's retry horizon ({format_duration(options.retry_horizon)}): a "
                      "client retrying that late is charged twice",
                      mechanism="retention-shorter-than-horizon")
    kept: list[float] = []
    forgotten: list[tuple[float, Attempt, Attempt]] = []
    for identity, attempts in view.keyed():
        reference = next((a for a in attempts if a.ok), None)
        if reference is None:
            continue
        for probe in attempts:
            if not probe.label.startswith("retention-probe") or not probe.ok:
                continue
            gap = probe.start - attempts[0].start
            if _executed_again(view, identity, reference, probe):
                forgotten.append((gap, reference, probe))
            else:
                kept.append(gap)
    if not kept and not forgotten:
        return
    low = max(kept, default=0.0)
    high = min((g for g, _, _ in forgotten), default=None)
    bracket = (f"between {format_duration(low)} and {format_duration(high)}" if high is not None
               else f"at least {format_duration(low)}")
    if any(view.spans_lost_clock(view.evidence(attempts)) for _, attempts in view.keyed()
           if any(a.label.startswith("retention-probe") for a in attempts)):
        # The harness's account may run ahead of the target's clock: a key kept "past" the
        # retention proves nothing, though one forgotten within it still does (below).
        yield Note("P6", None, f"the effective retention could not be measured ({bracket} by "
                               f"the harness's account): {view.lost_clock_reason()}",
                   undecided=True)
    else:
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
                    view.evidence([reference, probe]), mechanism="forgotten-within-retention",
                )


def _executed_again(view: View, identity: Identity, reference: Attempt, probe: Attempt) -> bool:
    """Was a retention probe executed anew (the key forgotten) rather than answered from the
    stored response?  Another charge in its answer says so; so does another body when the
    charges cannot be named, unless the key holds a single charge: a replay whose body
    differs from the original's is P3's to judge, not a key forgotten."""
    if probe.resource is not None and reference.resource is not None:
        return probe.resource != reference.resource
    if probe.digest == reference.digest:
        return False
    seen = view.effects.get(identity)
    return seen is None or seen.count is None or seen.count > 1


@prop("P7", "a missing key is rejected with 400 in strict mode and processed in lax mode")
def missing_key(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    strict = options.promises.mode == "strict"
    keyless: dict[str | None, list[Attempt]] = defaultdict(list)
    for attempt in view.attempts:
        if (attempt.invoke.key is None and attempt.invoke.key_header is None
                and attempt.answered and not attempt.label.startswith("hostile")):
            keyless[attempt.invoke.tenant].append(attempt)
    for attempts in keyless.values():
        for attempt in attempts:
            status = attempt.status
            if strict and status != DRAFT_MISSING_KEY:
                yield Finding("P7", None,
                              f"a request without a key got {status}; in strict mode it must be "
                              f"rejected with {DRAFT_MISSING_KEY}", view.evidence([attempt]),
                              mechanism="missing-key-not-refused")
            elif not strict and not attempt.ok and status not in (429, 503):
                yield Finding("P7", None,
                              f"a request without a key got {status}; in lax mode it must be "
                              "processed normally", view.evidence([attempt]),
                              mechanism="missing-key-not-processed")
    if not keyless:
        return
    if options.keyless == "none":
        yield Note("P7", None, "charges made without a key could not be counted (the target file "
                               "gives no [effects.keyless]): only the answers were judged")
        return
    for tenant, attempts in keyless.items():
        if options.keyless == "total":
            yield from _keyless_by_totals(view, attempts, strict)
            continue
        seen = view.effects.get((tenant, None))
        if seen is None or seen.count is None:
            reason = seen.error if seen and seen.error else "they were not counted"
            yield Note("P7", None, f"charges made without a key are unknown: {reason}",
                       undecided=True)
            continue
        processed = sum(1 for a in attempts if a.ok)
        expected = 0 if strict else processed
        if seen.count != expected:
            yield Finding("P7", None,
                          f"{seen.count} charges from {len(attempts)} requests without a key "
                          f"({processed} answered 2xx) where {expected} were expected "
                          f"({options.promises.mode} mode)",
                          view.evidence(attempts, seen.index), mechanism="keyless-charges-wrong")


def _keyless_by_totals(view: View, attempts: list[Attempt],
                       strict: bool) -> Iterator[Finding | Note]:
    """Judge each keyless request by the difference of the target's total charges around it."""
    for attempt in attempts:
        charged, why_not, totals = view.keyless_charges(attempt)
        if charged is None:
            yield Note("P7", None, f"what a request without a key charged is unknown: {why_not}",
                       undecided=True)
            continue
        expected = 1 if attempt.ok and not strict else 0
        if charged != expected:
            yield Finding("P7", None,
                          f"a request without a key answered {attempt.status} changed the "
                          f"target's total of charges by {charged} where {expected} was expected",
                          view.evidence([attempt], *totals), mechanism="keyless-charges-wrong")


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
            raced = any(a.invoke.time < first.end_time for a in attempts[1:])
            before = any(b.invoke.time < first.invoke.time
                         for other in others for b in view.by_identity[other])
            if first.status == options.promises.mismatch_status and before and not raced:
                yield Finding("P8", shown,
                              f"{shown} was refused with {first.status} on its first request "
                              "because another tenant had used the same key: keys are not "
                              "scoped per tenant", evidence, mechanism="keys-not-scoped-per-tenant")
            for attempt in (a for a in attempts if a.ok):
                if attempt.resource and own.ids and attempt.resource in own.ids:
                    continue  # its own charge
                sources = _leak_sources(view, attempt, identity, others)
                if sources or own.count == 0:
                    source = ", ".join(sources) or "another tenant"
                    executed = ("its own request was never executed" if own.count == 0
                                else f"its own request made {own.count} charge(s)")
                    yield Finding("P8", shown,
                                  f"{shown} received the stored response of {source} "
                                  f"({attempt.status}, {attempt.resource}); {executed}",
                                  evidence, mechanism="keys-not-scoped-per-tenant")
                    break


def _leak_sources(view: View, attempt: Attempt, identity: Identity,
                  others: list[Identity]) -> list[str]:
    """The other tenants whose response ``attempt`` received.  Their charge in the answer is
    proof.  Without ids, an answer with the same body naming a resource (a generic body such as
    "already processed" proves nothing) came from whichever tenant got it first: the tenant
    that received it later, or that has no charge of its own, is the one it leaked to."""
    sources = []
    own = view.effects.get(identity)
    for other in others:
        seen = view.effects.get(other)
        if attempt.resource and seen and seen.ids:
            if attempt.resource in seen.ids:
                sources.append(describe_identity(other))
            continue
        if attempt.resource is None:
            continue
        theirs = [b for b in view.by_identity[other] if b.ok and b.digest == attempt.digest]
        if not theirs:
            continue
        mine = [b for b in view.by_identity[identity] if b.ok and b.digest == attempt.digest]
        they_first = min(b.end_time for b in theirs) < min(b.end_time for b in mine)
        they_charged = seen is not None and bool(seen.count)
        i_charged = own is not None and bool(own.count)
        if (they_first and (they_charged or not i_charged)) or (they_charged and not i_charged):
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
    for attempt in view.attempts:
        if attempt.label.startswith("handler:") and attempt.completion is not None:
            what = f"the handler error ({attempt.label.removeprefix('handler:')})"
            incidents.append(_Incident(what, attempt.completion, attempt.completion,
                                       frozenset({attempt.identity})))
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
def crash_safety(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    yield from _faults_that_missed(view)
    incidents = _incidents(view)
    for incident in incidents:
        if incident.start is not incident.end:
            yield from _answers_during_outage(view, incident, options)
        for identity in sorted(incident.affected, key=describe_identity):
            yield from _converged(view, incident, identity, options)
    touched = {identity for incident in incidents for identity in incident.affected}
    for identity, attempts in view.keyed():
        if identity not in touched:
            yield from _stuck_past_retention(view, identity, attempts, options)


def _faults_that_missed(view: View) -> Iterator[Note]:
    """A fault planned after a store write that never struck (the request made fewer writes):
    what the scenario meant to test did not happen, so nothing it saw may pass."""
    for missed in (e for e in view.events if e.f == "store-fault-missed"):
        shown = describe_identity((missed.tenant, missed.key))
        value = missed.value
        yield Note("P9", shown,
                   f"the {value.get('fault')} planned right after write "
                   f"{value.get('after_write')} of key {shown} never struck: the store saw "
                   f"{value.get('writes')} write(s) from it this time, so whether the key "
                   "survives that fault is unknown", undecided=True)


def _answers_during_outage(view: View, incident: _Incident,
                           options: CheckOptions) -> Iterator[Finding | Note]:
    """While its store fails a server should answer 2xx, a replay, 409 or 503.  Another 5xx
    that charged nothing (every charge of its key is one a success names) is only the wrong
    status (a note); one behind which a charge exists that no success names, once a retry got
    a final answer after the outage, is a finding: the charge is lost to the client (under
    ``errors = "store"`` a 500 replayed).  With no such retry the evidence is not there: a
    careful client retries a 500, and whether it would find the charge is unknown (a
    correct service that answers 500 for a store error, its commit applied but its reply
    lost, was reported here)."""
    allowed = {*options.promises.in_progress_statuses, 503, 429}
    for attempt in view.attempts:
        status = attempt.status
        during = (attempt.invoke.time <= incident.end.time
                  and attempt.end_time >= incident.start.time)
        if not during or status is None or status < 500 or status in allowed:
            continue
        shown = describe_identity(attempt.identity)
        seen = view.effects.get(attempt.identity)
        attempts = view.by_identity[attempt.identity]
        named = {a.resource for a in attempts if a.ok and a.resource}
        count = seen.count if seen is not None and attempt.invoke.key is not None else None
        # Whether the key stuck is what its retries show (``_converged``), said only when
        # they show it
        errors = _errors(attempts, options)
        settled = any(a.end_time > incident.end.time and _final(view, a, errors, options)
                      for a in attempts)
        if count is not None and count <= len(named):
            yield Note("P9", shown,
                       f"during {incident.what} key {shown} got {status} where 503 is expected; "
                       "nothing was charged behind it"
                       + (" and a retry got a final answer" if settled else "")
                       + ", so that answer is only the wrong status")
            continue
        if not settled:  # no answer after the outage says whether the charge was found again
            yield Note("P9", shown,
                       f"during {incident.what} key {shown} got {status} where 503 is expected, "
                       "and a charge was made behind it; no retry got a final answer after the "
                       "outage, so whether that charge is lost to the client or would be "
                       "replayed is unknown", undecided=True)
            continue
        yield Finding("P9", shown,
                      f"during {incident.what} key {shown} got {status}; a server that loses "
                      "its store must answer 503 (or 409, or the stored response)",
                      view.evidence([attempt], incident.start.index, incident.end.index),
                      mechanism="failed-during-outage")


def _held_by_another(late: Attempt, attempts: list[Attempt], options: CheckOptions) -> bool:
    """May another request of the key hold it when ``late`` is told "in progress"?  One that
    ran at the same time, or one that claimed it (was not itself told "in progress") less
    than the lease before."""
    promises = options.promises
    others = [a for a in attempts if a is not late]
    if any(a.invoke.time < late.end_time and late.invoke.time < a.end_time for a in others):
        return True
    lease = (promises.lease or 0.0) + LEASE_SLACK
    return any(a.invoke.time < late.invoke.time and not promises.says_in_progress(a.status)
               and late.start - a.start <= lease for a in others)


def _stuck_past_retention(view: View, identity: Identity, attempts: list[Attempt],
                          options: CheckOptions) -> Iterator[Finding]:
    """A key still answered "in progress" longer after the last request that could have
    claimed it (one not itself told "in progress") than the whole retention window and the
    lease, with no other request of it running at the time: nothing will ever finish it, so
    every retry of it is refused for good."""
    promises = options.promises
    if promises.retention is None:
        return
    window = promises.retention + (promises.lease or 0.0) + LEASE_SLACK
    for late in attempts:
        if not promises.says_in_progress(late.status):
            continue
        others = [a for a in attempts if a is not late]
        if any(a.invoke.time < late.end_time and late.invoke.time < a.end_time for a in others):
            continue  # a request of the key ran meanwhile: it may hold the key
        claims = [a for a in others if a.invoke.time < late.invoke.time
                  and not promises.says_in_progress(a.status)]
        if not claims or late.start - max(a.start for a in claims) <= window:
            continue
        claimed = max(claims, key=lambda a: a.start)
        shown = describe_identity(identity)
        yield Finding("P9", shown,
                      f"key {shown} was still answered {late.status} (in progress) "
                      f"{format_duration(late.start - claimed.start)} after the last request "
                      f"that could have claimed it ({claimed.describe()}), past the promised "
                      f"retention of {format_duration(promises.retention)}, with no request of "
                      "it running: it is stuck for good", view.evidence(attempts),
                      mechanism=_stuck(view, identity))
        return


def _converged(view: View, incident: _Incident, identity: Identity,
               options: CheckOptions) -> Iterator[Finding | Note]:
    """The key's retries after the incident, inside its retention window (a retry after it
    is a new operation, which the contract lets execute anew), must reach a final answer,
    not stay in progress past the lease, and leave exactly one charge behind a success."""
    promises = options.promises
    healed_at = view.target_time(incident.end)
    retention = promises.retention
    everything = view.by_identity[identity]
    attempts = _window_of(view, incident, everything, retention)
    errors = _errors(attempts, options)
    after = [a for a in attempts if a.invoke.time > incident.end.time]
    shown = describe_identity(identity)
    evidence = view.evidence(attempts, incident.start.index, incident.end.index)
    if promises.lease is not None:
        stuck = [a for a in after if promises.says_in_progress(a.status)
                 and past_the_lease(promises.lease, since=healed_at, at=a.start)
                 and not _held_by_another(a, attempts, options)]
        if stuck:
            late = stuck[-1].start - healed_at
            mechanism = _stuck(view, identity)
            charged = (f"; its charge was already made ({_effects(view, identity).count}), and "
                       "the client can never learn its outcome"
                       if mechanism == "stuck-after-charge" else "")
            yield Finding("P9", shown,
                          f"key {shown} was still in progress {format_duration(late)} after "
                          f"{incident.what}, past the promised lease of "
                          f"{format_duration(promises.lease)}: it is stuck for good{charged}",
                          evidence, mechanism=mechanism)
            return
    # a request already running through the incident that answered after it counts too: its
    # final answer shows the key was not left in progress
    finals = [a for a in attempts
              if a.end_time > incident.end.time and _final(view, a, errors, options)]
    expired = (retention is not None and bool(attempts) and view.target_time(view.events[-1])
               > attempts[0].start + retention)
    if after and not finals and expired:
        return  # the key's window closed before its clients got an answer: a later retry is new
    if after and not finals and all(view.faults_during(a) for a in after):
        yield Note("P9", shown,
                   f"after {incident.what} every retry of key {shown} met a network fault "
                   f"({_story(after, view)}): whether it converges is unknown", undecided=True)
        return
    if after and not finals:
        last = max(a.start for a in after)
        if promises.lease is not None and not past_the_lease(promises.lease, since=healed_at,
                                                             at=last):
            waited = view.lease_not_waited()
            why = f" ({waited})" if waited else ""
            yield Note("P9", shown,
                       f"after {incident.what} key {shown} was still in progress when the "
                       f"retries stopped, {format_duration(last - healed_at)} later, before the "
                       f"promised lease of {format_duration(promises.lease)} ran out{why}: "
                       "whether it is stuck is unknown", undecided=True)
            return
        yield Finding("P9", shown,
                      f"after {incident.what}, {len(after)} retries of key {shown} never got an "
                      f"answer ({_story(after, view)})", evidence, mechanism="never-answered")
        return
    if any(a.ok for a in attempts):
        effects = _effects(view, identity)
        renewed = len(attempts) < len(everything)  # a later window may rightly charge anew
        # charges counted before the incident are not its doing (a race, a reuse run anew:
        # another property's evidence)
        before = view.counted_before(identity, incident.start.index)
        caused = effects.count is None or effects.count <= 1 or effects.count > before
        if effects.count != 1 and not (renewed and effects.count) and caused:
            yield Finding("P9", shown,
                          f"after {incident.what}, key {shown} ended with {effects.count} "
                          f"charges instead of exactly one ({_story(attempts, view)})",
                          view.evidence(attempts, incident.start.index, incident.end.index,
                                        effects.index),
                          mechanism=("charged-again-after-incident" if effects.count
                                     else "lost-after-incident"))


def _stuck(view: View, identity: Identity) -> str:
    """A key stuck for good, as a mechanism: with its charge already made (the work committed
    and its answer never stored) or with nothing charged (the claim was never released)."""
    return "stuck-after-charge" if _effects(view, identity).count else "stuck"


def _window_of(view: View, incident: _Incident, attempts: list[Attempt],
               retention: float | None) -> list[Attempt]:
    """The key's attempts in the retention window the incident struck: the window opens with
    the key's first request, not with the incident (a kill seconds after the claim does not
    stretch it), and a request sent after it closed is a new operation."""
    epochs = view.epochs(attempts, retention)
    struck = [e for e in epochs if e[0].invoke.time <= incident.start.time] or epochs[:1]
    return struck[-1] if struck else attempts


@prop("P10", "bad input gets a 4xx, causes no effect, and the server keeps serving")
def bad_input(view: View, options: CheckOptions) -> Iterator[Finding | Note]:
    hostile = [a for a in view.attempts if a.label.startswith("hostile")]
    sent: dict[tuple[Identity, str], list[Attempt]] = defaultdict(list)
    for attempt in hostile:
        sent[(attempt.identity, attempt.label)].append(attempt)
    for attempts in sent.values():  # judged by the last answer (one told to try later is sent
        answered = [a for a in attempts if a.answered] or attempts  # again)
        yield from _refused(view, answered[-1], options)
    if hostile:
        last_hostile = max(a.invoke.time for a in hostile)
        for control in view.attempts:
            if control.label == "control" and control.invoke.time > last_hostile and not control.ok:
                yield Finding("P10", None,
                              f"after the hostile requests an ordinary request got "
                              f"{control.status or 'no answer'}: the target stopped serving",
                              view.evidence([control]), mechanism="stopped-serving")
    for exit_event in view.exits:
        during = exit_event.value.get("scenario")
        yield Finding("P10", None,
                      f"the service exited with code {exit_event.value.get('code')}"
                      + (f" during {during}" if during else "")
                      + ": nothing killed it, and every request in flight was lost with it",
                      view.evidence([], exit_event.index), mechanism="service-exited")
    forged: dict[Identity, list[Attempt]] = defaultdict(list)
    for attempt in (a for a in view.attempts if a.label == "fake-replay"):
        forged[attempt.identity].append(attempt)
    for attempts in forged.values():  # judged once per key, by its last answer
        answered = [a for a in attempts if a.answered] or attempts
        yield from _forged_replay(view, answered[-1], options)


def _refused(view: View, attempt: Attempt, options: CheckOptions) -> Iterator[Finding | Note]:
    """A hostile request must be refused (with the declared status, for a key that breaks the
    declared rules) and charge nothing.  A key with control characters that the declared rules
    allow (``charset = "any"``) is a key: taking it is only a deviation from RFC 9110."""
    what = attempt.label.removeprefix("hostile:")
    status = attempt.status
    seen = view.effects.get(attempt.identity)
    charged = seen.count if seen is not None and seen.count else 0
    if attempt.invoke.key == "" and options.promises.mode == "lax" and attempt.ok and not charged:
        return  # lax: an empty key read as no key is processed like a request without one
    try_later = options.promises.says_in_progress(status) or status in (429, 503)
    if try_later and not charged:  # the target never judged the input
        yield Note("P10", None,
                   f"hostile input ({what}) was answered {status} (try later), so whether the "
                   "target refuses it is unknown", undecided=True)
        return
    key = attempt.invoke.key
    if (key and options.key.charset == "any" and options.key.accepts(key)
            and any(ord(c) < 0x20 or ord(c) == 0x7F for c in key)
            and status is not None and status < 500 and charged <= 1):
        if status < 400:
            yield Note("P10", None,
                       f"a key with control characters ({what}) was accepted with {status}, "
                       "as the target's key rules allow (charset = \"any\"); RFC 9110 "
                       "forbids control characters in header values")
        return
    key_rules = options.key.invalid_status
    bad_key = attempt.invoke.key_header is not None and attempt.invoke.key is not None and (
        not options.key.accepts(attempt.invoke.key) or attempt.invoke.key == "")
    if status is None or status >= 500:
        yield Finding("P10", None,
                      f"hostile input ({what}) made the target fail: {attempt.describe()}",
                      view.evidence([attempt]), mechanism=f"hostile-failed:{what}")
    elif status < 400:
        yield Finding("P10", None,
                      f"hostile input ({what}) was accepted with {status}; it must "
                      "be refused with " + (f"{key_rules}" if bad_key and key_rules else "a 4xx"),
                      view.evidence([attempt]), mechanism=f"hostile-accepted:{what}")
    elif bad_key and key_rules is not None and status != key_rules:
        yield Finding("P10", None,
                      f"a key that breaks the declared rules ({what}) got {status} where the "
                      f"target promises {key_rules}", view.evidence([attempt]),
                      mechanism=f"hostile-wrong-status:{what}")
    if seen is not None and charged:
        yield Finding("P10", None, f"hostile input ({what}) was answered {status or 'nothing'} "
                                   f"and caused {charged} charge(s)",
                      view.evidence([attempt], seen.index), mechanism=f"hostile-charged:{what}")


def _forged_replay(view: View, fake: Attempt, options: CheckOptions) -> Iterator[Finding]:
    """A new request that carries the replay header itself must be processed as new: charged
    once, answered 2xx, and not marked as a replay."""
    effects = _effects(view, fake.identity)
    shown = describe_identity(fake.identity)
    marked = options.promises.marks_replay(fake.headers)
    if not fake.ok or effects.count != 1:
        yield Finding("P10", shown,
                      "a new request that carried a forged replay header was not processed as "
                      f"new: {fake.describe()}, {effects.count} charge(s)",
                      view.evidence([fake], effects.index), mechanism="forged-replay-not-new")
    elif marked:
        yield Finding("P10", shown,
                      "a new request that carried a forged replay header was processed (one "
                      "charge), but its answer is marked as a replay: the server echoes the "
                      "client's header", view.evidence([fake], effects.index),
                      mechanism="forged-replay-echoed")


def _live_at(attempts: Sequence[Attempt], when: float, horizon: float) -> bool:
    """May a key's row still be in the table at history time ``when``?  Yes if it was first
    used within the retention (target time after ``horizon``), or if one of its requests was
    still running then or ended after ``horizon``: a row in progress is no expired row, though
    a clock jump made its key old, and retention may run from the request's end."""
    begun = [a for a in attempts if a.invoke.time <= when]
    return bool(begun) and (begun[0].start > horizon
                            or any(a.end is None or a.end > horizon for a in begun))


def _expiry_evidence(view: View, keyed: Iterable[Sequence[Attempt]], observation: Event,
                     horizon: float) -> tuple[int, ...]:
    """What shows that a key table kept expired keys: the first request of each expired key
    and the answer that ended its last one (a story cut down to its evidence waits for it, so
    the key is not still in progress when the clock jumps), the clock jumps that aged them
    (none made while one of those first requests ran, which would make the finding one a moved
    clock alone showed), and the reading.  A story cut down to its evidence then still makes
    and ages the keys (no-cleanup's story at seed 5 stayed at 14 steps when only the reading
    was cited)."""
    expired = [attempts for attempts in keyed
               if attempts[0].invoke.time <= observation.time
               and not _live_at(attempts, observation.time, horizon)]
    ends = [a.completion.index for attempts in expired for a in attempts[-1:]
            if a.completion is not None]
    during = {j.index for attempts in expired for j in view.jumps_during(attempts[0])}
    jumps = [j.index for j in view.jumps if j.time <= observation.time and j.index not in during]
    return tuple(sorted({*(a[0].invoke.index for a in expired), *ends, *jumps,
                         observation.index}))


def _retained_from(attempts: Sequence[Attempt], when: float) -> float:
    """The target time from which a key's retention may run, as seen at history time
    ``when``: its first request's start, or the latest end of one of its requests (a record
    stored after the answer starts its TTL then); a request still running has not let it
    start."""
    begun = [a for a in attempts if a.invoke.time <= when]
    ends = [a.end if a.end is not None else float("inf") for a in begun]
    return max([begun[0].start, *ends]) if begun else float("inf")


@prop("P11", "bounded storage: expired keys are removed")
def bounded_storage(view: View, options: CheckOptions) -> Iterator[Finding]:
    retention = options.promises.retention
    if not view.store_sizes or retention is None:
        return
    grace, allowed = options.promises.expiry_allowance()
    if not view.events:
        return
    start = view.target_time(view.events[0])
    keyed = {identity: attempts for identity, attempts in view.by_identity.items()
             if identity[1] is not None}
    for observation in view.store_sizes:
        now = view.target_time(observation)
        if now < start + retention + grace:
            continue
        horizon = now - retention - grace
        live = sum(1 for attempts in keyed.values()
                   if _live_at(attempts, observation.time, horizon))
        rows = int(observation.value.get("rows", 0))
        if rows > live:
            oldest = min((_retained_from(a, observation.time) for a in keyed.values()
                          if not _live_at(a, observation.time, horizon)), default=float("inf"))
            past = f", the oldest {format_duration(now - retention - oldest)} past it" if (
                oldest < float("inf")) else ""
            yield Finding("P11", None,
                          f"the key table holds {rows} rows {format_duration(now - start)} into "
                          f"the run, but only {live} keys are within the retention of "
                          f"{format_duration(retention)}{past} (allowing {allowed}): expired "
                          "keys are not removed and the table grows without bound",
                          _expiry_evidence(view, keyed.values(), observation, horizon),
                          mechanism="expired-keys-kept")

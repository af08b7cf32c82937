"""``probe``: learn a target's promises by asking it, with a few requests under fresh keys.

Each observation is set beside the promise it bears on, as one of five kinds: *confirmed* (the
file already says so), *learned* (the file said otherwise, or nothing, and the service's
choice is one the IETF draft allows), *deviation* (the service departs from the draft: it is
written, with a comment saying so, and ``run`` still notes it), *bug* (what was seen is wrong,
not a choice: nothing is written but the comment, so ``run`` reports it) and *unknown* (the
requests could not tell).  A probe never turns a bug into a promise silently.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness._errors import UsageError
from harness._history import Event
from harness._target import Target
from harness.http._client import Request
from harness.http._deployment import Deployment
from harness.http.drafting._probe_clock import restart_resets
from harness.http.drafting._probe_keys import KeyRules, disagreements, probe_keys, proposed_pattern
from harness.http.drafting._probe_session import VOLATILE_HEADERS, ProbeEffects, ProbeSession
from harness.http.drafting._probe_types import Kind, Observation
from harness.http.drafting._probe_types import answered_2xx as _ok
from harness.http.drafting._probe_types import describe_answer as _answer
from harness.services._paths import state_dir
from harness.services._toxiproxy import start_toxiproxy

__all__ = ["DRAFT", "Observation", "ProbeReport", "declared_in", "probe_target"]

#: What the IETF draft says, where a probe compares.
DRAFT = {"missing": 400, "mismatch": 422, "in_progress": 409}
#: How long the slow hook holds the original, in milliseconds: long enough to meet it.
_SLOW_MS = 1500
_COPIES = 6  # concurrent copies of one request, when the target has no slow hook


@dataclass(frozen=True, slots=True)
class ProbeReport:
    target: Target
    observations: tuple[Observation, ...]
    effects: ProbeEffects
    requests: int
    tenant: str | None




def _refused(event: Event | None) -> bool:
    return event is not None and event.status is not None and 400 <= event.status < 500


def _title(header: str) -> str:
    """``idempotent-replayed`` as ``Idempotent-Replayed``: answers' names come lowercased."""
    return "-".join(part.capitalize() for part in header.split("-"))




class _Observer:
    """The probe's steps, in order; each returns its observations."""

    def __init__(self, session: ProbeSession) -> None:
        self.session = session
        self.target = session.target
        self.promises = session.target.promises
        self.marker: tuple[str, str] | None = None
        self.mismatch: int | None = None

    def run(self) -> Iterator[Observation]:
        session = self.session
        key, body = session.key(), session.body()
        first = session.send(key, body, label="probe: first request")
        if not _ok(first):
            raise UsageError(
                f"{self.target.source}: the probe's first request ({self.target.endpoint.label} "
                f"with a fresh key) got {_answer(first)} {(first.body or '')[:200]!r}; the probe "
                "needs one request the service accepts\n  fix: correct the body template, the "
                "headers or [tenant] in the target file")
        replay = session.send(key, body, label="probe: the same request again")
        second = session.send(session.key(), session.body(), label="probe: another fresh key")
        yield from self._replay(first, replay, second)
        yield from self._missing_key()
        yield from self._reuse(key, first)
        yield from self._query()
        yield from self._validation()
        yield from self._in_progress()
        yield from self._key_rules(probe_keys(session))
        yield from restart_resets(session)  # last: it restarts the target

    # ---- replays ---------------------------------------------------------------------------

    def _is_replay_of(self, answer: Event, original: Event) -> bool:
        if self.marker is not None:
            name, value = self.marker
            if self.session.headers(answer).get(name) == value:
                return True
        if answer.resource is not None and answer.resource == original.resource:
            return True
        return answer.status == original.status and answer.body_digest == original.body_digest

    def _marker(self, replay: Event, fresh: list[Event]) -> tuple[str, str] | None:
        """The header (and value) only the replay carries, if there is one clear one."""
        seen = [self.session.headers(e) for e in fresh]
        candidates = []
        for name, value in self.session.headers(replay).items():
            if name in VOLATILE_HEADERS or any(h.get(name) == value for h in seen):
                continue
            values = {h.get(name) for h in seen if name in h}
            if len(values) > 1:
                continue  # differs between fresh answers too: a request id, not a marker
            candidates.append((name, value))
        telling = [c for c in candidates if "replay" in c[0] or "idempot" in c[0]]
        if len(telling) == 1:
            return telling[0]
        return candidates[0] if len(candidates) == 1 else None

    def _replay(self, first: Event, replay: Event, second: Event) -> Iterator[Observation]:
        found = self._marker(replay, [first, second])
        declared = self.promises.replay_marker
        shown = f"{_title(found[0])}: {found[1]}" if found else None
        if declared is not None and declared.marks(self.session.headers(replay)):
            self.marker = (declared.header.lower(), self.session.headers(replay).get(
                declared.header.lower(), declared.value))
            yield Observation("promises", "replay_header", "confirmed",
                              f"a replay carried {declared.header}: {declared.value}")
        elif declared is not None and found is not None:
            self.marker = found
            yield Observation("promises", "replay_header", "learned",
                              f"a replay carried {shown}, not {declared.header}: "
                              f"{declared.value} as the file said", _title(found[0]))
            yield Observation("promises", "replay_value", "learned", f"on a replay: {shown}",
                              found[1])
        elif declared is not None:
            yield Observation(
                "promises", "replay_header", "bug",
                f"a replay did NOT carry {declared.header}: {declared.value}, so a client cannot "
                "tell it from a fresh answer; kept, so `run` reports it (P3): remove the line "
                "if the service never marks replays")
        elif found is not None:
            self.marker = found
            yield Observation("promises", "replay_header", "learned",
                              f"a replay carried {shown}; fresh answers did not", _title(found[0]))
            yield Observation("promises", "replay_value", "learned", f"on a replay: {shown}",
                              found[1])
        else:
            yield Observation("promises", "replay_header", "confirmed",
                              "no header marks a replay (none is declared)")
        field = "replay_header" if (declared is not None or found is not None) else None
        if replay.status != first.status:
            yield Observation(
                "promises", field, "bug",
                f"the same request with the same key got {_answer(replay)} where the original "
                f"got {first.status}: the IETF draft replays the original status; `run` "
                "reports it (P3)")
        elif not self._is_replay_of(replay, first):
            yield Observation(
                "promises", field, "bug",
                "the same request with the same key got another answer (another resource or "
                "body) than the original: not a replay; `run` reports it (P1/P3)")

    # ---- a missing key -------------------------------------------------------------------------

    def _missing_key(self) -> Iterator[Observation]:
        answer = self.session.send_keyless(self.session.body())
        declared = self.promises.mode
        if _ok(answer):
            mode, note = "lax", f"a request without a key got {answer.status}: processed"
        elif _refused(answer):
            mode, note = "strict", f"a request without a key got {answer.status}"
        else:
            yield Observation("promises", "mode", "unknown",
                              f"a request without a key got {_answer(answer)}")
            return
        if mode == "strict" and answer.status != DRAFT["missing"]:
            yield Observation("promises", "mode", "deviation",
                              f"{note}; the IETF draft says {DRAFT['missing']}: `run` reports "
                              "it (P7)", mode)
            return
        kind: Kind = "confirmed" if declared == mode else "learned"
        yield Observation("promises", "mode", kind, note, mode)

    # ---- reuse ---------------------------------------------------------------------------------

    def _reuse(self, key: str, first: Event) -> Iterator[Observation]:
        answer = self.session.send(key, self.session.body(), label="probe: the key, another body")
        declared = self.promises.mismatch_status
        if _refused(answer):
            status = answer.status
            assert status is not None
            self.mismatch = status
            if status != DRAFT["mismatch"]:
                yield Observation("promises", "mismatch_status", "deviation",
                                  f"a reused key with another body got {status}; the IETF "
                                  f"draft says {DRAFT['mismatch']}: `run` notes the deviation",
                                  status)
            else:
                yield Observation("promises", "mismatch_status",
                                  "confirmed" if declared == status else "learned",
                                  f"a reused key with another body got {status}", status)
        elif _ok(answer):
            what = ("the first answer, replayed" if self._is_replay_of(answer, first)
                    else "a new charge")
            yield Observation(
                "promises", "mismatch_status", "bug",
                f"a reused key with another body got {answer.status} ({what}): NOT a promise, "
                f"the IETF draft wants {DRAFT['mismatch']} and no charge; kept at {declared} so "
                "`run` reports it (P4)")
        else:
            yield Observation("promises", "mismatch_status", "unknown",
                              f"a reused key with another body got {_answer(answer)}")

    def _query(self) -> Iterator[Observation]:
        """One factor at a time: a fresh key, its request, the same request with another query
        string, then the first request again as a control.  A refusal means the query is part
        of the request only if the control is still replayed: otherwise the key's request was
        changed by the refusal (a bug), and the query string proved nothing."""
        session = self.session
        key, body = session.key(), session.body()
        first = session.send(key, body, label="probe: a fresh key, for the query string")
        if not _ok(first):
            yield Observation("promises", "query_in_fingerprint", "unknown",
                              f"a fresh key's request got {_answer(first)}")
            return
        path = self.target.endpoint.path
        path += ("&" if "?" in path else "?") + "idem_probe=1"
        answer = session.send(key, body, path=path, label="probe: another query string")
        control = session.send(key, body, label="probe: the first request again")
        declared = self.promises.query_in_fingerprint
        mismatch = self.mismatch or self.promises.mismatch_status
        if _refused(answer) and answer.status == mismatch:
            if not (_ok(control) and self._is_replay_of(control, first)):
                yield Observation(
                    "promises", "query_in_fingerprint", "bug",
                    f"the same key and body with another query string got {answer.status}, "
                    f"and then the first request itself got {_answer(control)}: the refusal "
                    "changed what the key holds (P3/P4), so the query string proved nothing")
                return
            observed, note = True, f"the same key and body with another query string got " \
                                   f"{answer.status}: the query is part of the request"
        elif _ok(answer) and self._is_replay_of(answer, first):
            observed, note = False, "the same key and body with another query string got the " \
                                    "replay: the query is not part of the request"
        elif _ok(answer):
            yield Observation("promises", "query_in_fingerprint", "bug",
                              "the same key and body with another query string made a new "
                              "charge: a used key must never run again (P1)")
            return
        else:
            yield Observation("promises", "query_in_fingerprint", "unknown",
                              f"another query string got {_answer(answer)}")
            return
        yield Observation("promises", "query_in_fingerprint",
                          "confirmed" if declared == observed else "learned", note, observed)

    # ---- validation errors ---------------------------------------------------------------------

    def _validation(self) -> Iterator[Observation]:
        session = self.session
        endpoint = self.target.endpoint
        invalid = next(iter(endpoint.invalid_values.items()), None)
        if invalid is not None and invalid[1]:
            bad: Any = session.body(**{invalid[0]: invalid[1][0]})
            shown = f"{invalid[0]} = {invalid[1][0]!r}"
        else:
            bad, shown = {}, "an empty JSON object"
        key = session.key()
        refused = session.send(key, bad, label="probe: an invalid body")
        declared = self.promises.validation_errors
        if not _refused(refused):
            kind: Kind = "bug" if invalid is not None and _ok(refused) else "unknown"
            why = " although [endpoint] invalid_values says it is refused (P10)" if (
                kind == "bug") else ""
            yield Observation("promises", "validation_errors", kind,
                              f"a body with {shown} got {_answer(refused)}{why}")
            return
        session.send(key, bad, label="probe: the invalid body again")
        after = session.send(key, session.body(), label="probe: a valid body, same key")
        mismatch = self.mismatch or self.promises.mismatch_status
        if _ok(after):
            observed = "not-stored"
            note = (f"a {refused.status} for {shown} was not stored: a valid body under the "
                    "same key then ran")
        elif after.status == mismatch:
            observed = "stored"
            note = (f"a {refused.status} for {shown} was stored: a valid body under the same "
                    f"key then got {after.status}")
        else:
            yield Observation("promises", "validation_errors", "unknown",
                              f"after a {refused.status} for {shown}, a valid body under the "
                              f"same key got {_answer(after)}")
            return
        if declared == observed:
            yield Observation("promises", "validation_errors", "confirmed", note, observed)
        else:
            said = "" if declared == "either" else f" (the file said {declared!r})"
            yield Observation("promises", "validation_errors", "learned", note + said, observed)

    # ---- in progress ---------------------------------------------------------------------------

    def _in_progress(self) -> Iterator[Observation]:
        met = self._meet_in_progress()
        if met is None and self.target.hooks.slow is None:
            yield Observation(
                "promises", "in_progress", "unknown",
                f"{_COPIES} copies sent at once were each answered 2xx: without a slow hook "
                "probe cannot hold the original, so a copy answered with the replay may have "
                "come after it had finished, and whether the service waits or answers 409 is "
                "unknown; a slow hook ([hooks.slow]) lets probe hold it")
            return
        if met is None:
            yield Observation(
                "promises", "in_progress", "unknown",
                "no retry met the original still running (the handler is too fast): a slow "
                "hook ([hooks.slow]) lets probe hold it")
            return
        answer, waited = met
        status = answer.status
        retry_after = "retry-after" in self.session.headers(answer)
        if _ok(answer):
            yield self._compare("in_progress", "wait",
                                f"a retry while the original ran waited {waited:.1f} s and got "
                                f"the replay ({status})")
            return
        if status is None:
            yield Observation("promises", "in_progress", "unknown",
                              f"a retry while the original ran got {_answer(answer)}")
            return
        if waited >= 0.5:
            yield self._compare("in_progress", "wait",
                                f"a retry while the original ran waited {waited:.1f} s, then "
                                f"got {status}")
        else:
            yield self._compare("in_progress", "conflict",
                                f"a retry while the original ran got {status} at once")
        note = f"the in-progress answer was {status}" + (
            " with Retry-After" if retry_after else " without Retry-After")
        if waited < 0.5 and status != DRAFT["in_progress"]:
            yield Observation("promises", "in_progress_status", "deviation",
                              f"{note}; the IETF draft says {DRAFT['in_progress']}", status)
        else:
            yield self._compare("in_progress_status", status, note)
        yield self._compare("retry_after", retry_after, note)

    def _compare(self, field: str, observed: Any, note: str) -> Observation:
        declared = getattr(self.promises, field)
        same = (observed in self.promises.in_progress_statuses if field == "in_progress_status"
                else declared == observed)
        return Observation("promises", field, "confirmed" if same else "learned", note, observed)

    def _meet_in_progress(self) -> tuple[Event, float] | None:
        """A retry that met its original still running, and how long it took; None if none
        did."""
        session = self.session
        key, body = session.key(), session.body()
        slow = self.target.hooks.slow
        if slow is not None:
            slowed = {slow.header: slow.value.replace("{ms}", str(_SLOW_MS))}
            timeout = max(self.target.client.timeout, _SLOW_MS / 1000 + 5)
            original = session.in_background(lambda: session.send(
                key, body, headers=slowed, timeout=timeout, label="probe: a slow original"))
            session.wait_until_in_progress()
            started = time.monotonic()
            retry = session.send(key, body, label="probe: a retry while it runs")
            waited = time.monotonic() - started
            first = original()
            if first is not None and first.time >= retry.time - waited:
                return retry, waited
            return None
        return self._concurrent_copies(key, body)

    def _concurrent_copies(self, key: str, body: Any) -> tuple[Event, float] | None:
        session = self.session
        barrier = threading.Barrier(_COPIES)
        answers: list[Event] = []
        lock = threading.Lock()

        def copy() -> None:
            barrier.wait(timeout=30)
            answer = session.client.send(
                Request(key=key, tenant=session.tenant, body=body, label="probe: concurrent copy"),
                process="probe")
            with lock:
                answers.append(answer)

        threads = [threading.Thread(target=copy) for _ in range(_COPIES)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=self.target.client.timeout + 30)
        # A copy refused (409 at once) met another running.  A copy answered with the replay
        # proves nothing: sent before the first answer arrived, it may still have reached the
        # service after the original had finished (one worker serves them one by one).
        met = next((a for a in answers if a.status is not None and not _ok(a)), None)
        return (met, 0.0) if met is not None else None

    # ---- keys ----------------------------------------------------------------------------------

    def _key_rules(self, rules: KeyRules) -> Iterator[Observation]:
        spec = self.target.key
        accepted, refused = rules.limit()
        max_length = spec.max_length
        if accepted is not None and refused is None:
            max_length = 0
            yield self._key("max_length", spec.max_length, 0,
                            f"accepted keys up to {max(rules.lengths)} characters (0: no limit)")
        elif accepted is not None and refused is not None:
            max_length = accepted
            exact = "" if refused == accepted + 1 else f" (somewhere up to {refused - 1})"
            yield self._key("max_length", spec.max_length, accepted,
                            f"accepted {accepted} characters{exact}, refused {refused}")
        found = disagreements(rules, spec.pattern, max_length)
        if found:
            pattern = proposed_pattern(rules)
            note = "; ".join(found[:3]) + ("; ..." if len(found) > 3 else "")
            if "é" in rules.accepted_characters:
                yield Observation("key", "pattern", "deviation",
                                  f"{note}; it accepts non-ASCII keys, where the IETF draft's "
                                  "keys are printable ASCII", pattern)
            else:
                yield Observation("key", "pattern", "learned", note, pattern)
        else:
            yield Observation("key", "pattern", "confirmed",
                              f"the file's rules agree with the service on {len(rules.keys)} "
                              "keys (lengths, punctuation, a space, a non-ASCII letter)")
        if len(rules.refusals) == 1:
            status = next(iter(rules.refusals))
            yield self._key("invalid_status", spec.invalid_status, status,
                            f"refused keys got {status}")
        elif rules.refusals:
            listed = ", ".join(str(s) for s in sorted(rules.refusals))
            yield Observation("key", "invalid_status", "unknown",
                              f"refused keys got several statuses: {listed}")

    @staticmethod
    def _key(field: str, declared: Any, observed: Any, note: str) -> Observation:
        return Observation("key", field, "confirmed" if declared == observed else "learned",
                           note, observed)


def _effect_bugs(effects: ProbeEffects) -> Iterator[Observation]:
    for key, (counted, expected) in effects.unexpected.items():
        what = f"key {key!r}" if key is not None else "a request without a key"
        prop = "P1" if counted > expected else "P2"
        yield Observation("promises", None, "bug",
                          f"{what} made {counted} charge(s) where {expected} was expected "
                          f"({prop})")


#: Values that promise nothing either way: whatever is seen may be learned over them.
_NO_PROMISE = {"validation_errors": "either"}


def _against_declared(observations: list[Observation], target: Target,
                      declared: Collection[tuple[str, str]]) -> list[Observation]:
    """A promise the file makes is the author's word: what contradicts it is reported as a
    likely bug and never written over it, so ``run`` judges the service against it.  Only an
    undeclared promise (left to its default, or drafted with a ``FILL IN``) may be learned."""
    checked = []
    for observation in observations:
        field = observation.field
        if (observation.writes and field is not None
                and (observation.section, field) in declared):
            promised = getattr(getattr(target, observation.section), field)
            if promised != observation.value and _NO_PROMISE.get(field) != promised:
                observation = Observation(
                    observation.section, field, "bug",
                    f"{observation.note}; the file promises {field} = {promised!r}: the service "
                    "does not keep its own promise, a likely bug; kept, so `run` reports it")
        checked.append(observation)
    return checked


def declared_in(target: Target) -> frozenset[tuple[str, str]]:
    """The promises and key rules ``target`` was given explicitly (its file set them)."""
    return frozenset((section, field) for section in ("promises", "key")
                     for field in getattr(target, section).model_fields_set)


def probe_target(target: Target, *, allow_remote: bool = False, seed: int | None = None,
                 declared: Collection[tuple[str, str]] | None = None) -> ProbeReport:
    """Start (or reach) the target behind a Toxiproxy proxy, probe it, count what the probe
    caused, and stop everything it started.  ``declared``: the ``(section, field)`` promises
    the file makes (default: every one it sets), which a probe never writes over."""
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="probe-", dir=state_dir())))
        toxiproxy = stack.enter_context(start_toxiproxy(log_dir=workdir))
        deployment = stack.enter_context(Deployment(
            target, toxiproxy=toxiproxy, workdir=workdir / "target", allow_remote=allow_remote))
        session = ProbeSession(deployment, seed=seed)
        stack.callback(session.close)
        observations = _against_declared(
            list(_Observer(session).run()), target,
            declared_in(target) if declared is None else declared)
        effects = session.count_effects()
        observations += _effect_bugs(effects)
        requests = sum(1 for e in session.history.events()
                       if e.f == "request" and e.type == "invoke")
        report = ProbeReport(target, tuple(observations), effects, requests, session.tenant)
    return report

"""The checker, the single judge: every registered property over one history, verdicts merged.

Properties are plain functions registered under their ids; ``check_history`` runs them all over
one history and merges their verdicts.

A property that crashes, or cannot decide (an effects query failed), yields ``unknown`` rather
than a guess: Jepsen's ``check-safe``.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness._errors import UsageError
from harness._front import DEFAULT_KIND, front_named, kind_of
from harness._history import Event
from harness._target import (
    ErrorPolicy,
    KeylessCounting,
    KeySpec,
    Promises,
    Target,
    keyless_counting,
    split_route,
)
from harness.judging._analysis import View
from harness.judging._findings import (
    Finding,
    Klass,
    Note,
    Verdict,
    klass_of,
    merge_verdicts,
    sort_findings,
)

__all__ = [
    "ELAPSED_TIME_MECHANISMS",
    "LOST_CLOCK",
    "MOVED_CLOCK",
    "PROPERTIES",
    "CheckOptions",
    "CheckResult",
    "Inconclusive",
    "PropertyResult",
    "PropertySpec",
    "Registry",
    "check_history",
    "prop",
]


class Inconclusive(Exception):
    """Raised by a property that lacks what it needs to decide (its verdict is ``unknown``)."""


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """What judgement depends on besides the history: the target's promises and the client."""

    promises: Promises
    retry_horizon: float = 86400.0
    key: KeySpec = field(default_factory=KeySpec)
    keyless: KeylessCounting = "exact"
    #: The declared keyed operations as (METHOD, path); empty means "whatever was sent".
    operations: tuple[tuple[str, str], ...] = ()
    #: The kind of target whose history it is: its front end's properties judge it.
    kind: str = DEFAULT_KIND
    #: The error policy of each handler fault that has its own (``[[hooks.handler_errors]]``
    #: ``errors``), by name: a key failed by that fault is judged under it.
    handler_errors: Mapping[str, ErrorPolicy] = field(default_factory=dict)
    #: Is a finding whose evidence needs a clock jump made while one of its key's requests ran
    #: a finding?  A jump is not elapsed time for the target's own timers (a lease renewed
    #: while the handler runs), so by default such a finding is reported as "seen only with a
    #: moved clock" until real time confirms it (``CheckResult.unconfirmed``).
    trust_moved_clock: bool = False

    @classmethod
    def for_target(cls, target: Target, retry_horizon: float = 86400.0, *,
                   trust_moved_clock: bool | None = None) -> CheckOptions:
        """The options ``target``'s file implies.  ``trust_moved_clock`` unset: a jump is
        trusted unless the target renews its lease while the handler runs (then only real time
        can let a running request's lease run out)."""
        operations = tuple((o.method.upper(), o.path) for o in target.keyed_operations)
        kind = kind_of(target)
        handler_errors = {f.name: f.errors for f in target.hooks.handler_faults
                          if f.errors is not None}
        trust = (not target.promises.lease_renewed if trust_moved_clock is None
                 else trust_moved_clock)
        return cls(target.promises, retry_horizon, target.key,
                   keyless_counting(target.effects), operations, kind, handler_errors, trust)

    def errors_for(self, labels: Iterable[str]) -> ErrorPolicy:
        """The error policy a key is judged under: that of the handler fault named in one of
        its requests' labels (``handler:<name>``), else the promised one."""
        for label in labels:
            name = label.removeprefix("handler:")
            if label.startswith("handler:") and name in self.handler_errors:
                return self.handler_errors[name]
        return self.promises.errors

    def declares(self, method: str | None, path: str | None) -> bool:
        """Is ``method path`` (query string aside) an operation the target says is keyed?  An
        answer on any other route says nothing about the idempotency layer."""
        return not self.operations or split_route(method, path)[:2] in self.operations


PropertyCheck = Callable[[View, CheckOptions], Iterable[Finding | Note]]
Summary = Callable[[View, CheckOptions], dict[str, Any]]
#: Which properties a history gave something to judge (``CheckResult.exercised``).
Exercised = Callable[[View, CheckOptions], frozenset[str]]


@dataclass(frozen=True, slots=True)
class PropertySpec:
    id: str
    title: str
    check: PropertyCheck

    @property
    def klass(self) -> Klass:
        return klass_of(self.id)


class Registry:
    """Properties by id; registering an id twice is a programming error, caught at import."""

    def __init__(self, module: str = "harness.judging._properties") -> None:
        self._specs: dict[str, PropertySpec] = {}
        self._module = module
        self._summary: Summary | None = None
        self._exercised: Exercised | None = None

    def summarise(self, summary: Summary) -> Summary:
        """Register the tally kept beside the verdicts (a queue consumer's queue account)."""
        self._summary = summary
        return summary

    def summary(self, view: View, options: CheckOptions) -> dict[str, Any]:
        self._registered()
        return self._summary(view, options) if self._summary is not None else {}

    def exercises(self, exercised: Exercised) -> Exercised:
        """Register what tells which properties a history gave something to judge."""
        self._exercised = exercised
        return exercised

    def exercised(self, view: View, options: CheckOptions) -> frozenset[str]:
        """The properties ``view`` gave something to judge (every one, if nobody says)."""
        self._registered()
        if self._exercised is None:
            return frozenset(self._specs)
        return self._exercised(view, options)

    def register(self, spec: PropertySpec) -> None:
        known = self._specs.get(spec.id)
        if known is not None and _origin(known) != _origin(spec):  # a re-import is no clash
            raise UsageError(f"property {spec.id} is already registered "
                             f"by {known.check.__module__}")
        self._specs[spec.id] = spec

    def __getitem__(self, property_id: str) -> PropertySpec:
        try:
            return self._registered()[property_id]
        except KeyError:
            raise UsageError(f"unknown property {property_id!r}; known: "
                             f"{', '.join(self.ids())}") from None

    def ids(self) -> list[str]:
        return sorted(self._registered(), key=lambda p: int(p[1:]))

    def _registered(self) -> dict[str, PropertySpec]:
        """The specs, P1-P11 among them: ``harness.judging._properties`` registers those when it is
        imported, which happens on first use rather than at ``import harness`` so that the
        package stays cheap to import (every pytest run imports it, through the plugin)."""
        importlib.import_module(self._module)
        return self._specs

    def specs(self) -> list[PropertySpec]:
        return [self._specs[i] for i in self.ids()]


def _origin(spec: PropertySpec) -> tuple[str, str]:
    return (spec.check.__module__, spec.check.__qualname__)


#: P1-P11 over an HTTP service's history (``_properties.py``); another kind of target's are its
#: front end's (``Front.properties``).
PROPERTIES = Registry()


def prop(property_id: str, title: str, *,
         registry: Registry = PROPERTIES) -> Callable[[PropertyCheck], PropertyCheck]:
    """Register a property check: ``@prop("P1", "at most one side effect per (tenant, key)")``."""

    def register(check: PropertyCheck) -> PropertyCheck:
        registry.register(PropertySpec(property_id, title, check))
        return check

    return register


@dataclass(frozen=True, slots=True)
class PropertyResult:
    property: str
    verdict: Verdict
    findings: tuple[Finding, ...] = ()
    notes: tuple[Note, ...] = ()
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class CheckResult:
    results: dict[str, PropertyResult]
    findings: list[Finding] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    #: Findings seen only with a moved clock (``CheckOptions.trust_moved_clock``), reported as
    #: notes: a front end that can replay the story in real time may confirm them.
    unconfirmed: list[Finding] = field(default_factory=list)
    #: What the checker tallied beside its verdicts, for reports (a queue consumer's queue
    #: account, harness/consumer/_account.py); empty for an HTTP service.
    summary: dict[str, Any] = field(default_factory=dict)
    #: The properties the history gave something to judge (a pass of any other one is a pass
    #: on nothing): the explorer counts an example as deciding a property only if it did.
    exercised: frozenset[str] = frozenset()

    @property
    def verdict(self) -> Verdict:
        return merge_verdicts(r.verdict for r in self.results.values())


def _check_safe(spec: PropertySpec, view: View, options: CheckOptions) -> PropertyResult:
    try:
        produced = list(spec.check(view, options))
    except Inconclusive as exc:
        return PropertyResult(spec.id, "unknown", reason=str(exc))
    except Exception as exc:  # a checker bug must not hide the other properties' verdicts
        detail = "".join(traceback.format_exception_only(exc)).strip()
        return PropertyResult(spec.id, "unknown", reason=f"the check crashed: {detail}")
    findings = tuple(p for p in produced if isinstance(p, Finding))
    notes = tuple(p for p in produced if isinstance(p, Note))
    if findings:
        return PropertyResult(spec.id, "fail", findings, notes)
    undecided = [n.message for n in notes if n.undecided]
    if undecided:
        return PropertyResult(spec.id, "unknown", (), notes, "; ".join(undecided))
    return PropertyResult(spec.id, "pass", (), notes)


def check_history(
    events: Sequence[Event], options: CheckOptions, *, properties: Sequence[str] | None = None
) -> CheckResult:
    """Judge one history against the chosen properties (all registered ones by default)."""
    view = View(events)
    registry = front_named(options.kind).properties()
    chosen = [registry[p] for p in properties] if properties else registry.specs()
    results = {spec.id: _check_safe(spec, view, options) for spec in chosen}
    unconfirmed: list[Finding] = []
    if view.clock_lost is not None:
        results = {pid: _doubt_lost_clock(result, view) for pid, result in results.items()}
    if not options.trust_moved_clock:
        for pid, result in results.items():
            results[pid], doubted = _doubt_moved_clock(result, view)
            unconfirmed += doubted
    findings = sort_findings(f for r in results.values() for f in r.findings)
    notes = [n for r in results.values() for n in r.notes]
    summary = (registry.summary(view, options) if properties is None
               else {})  # a partial check is no account of the run
    return CheckResult(results, findings, notes, sort_findings(unconfirmed), summary=summary,
                       exercised=registry.exercised(view, options) & set(results))


#: How a finding seen only with a moved clock is told.
MOVED_CLOCK = "seen only with a moved clock"
#: How a finding that rests on elapsed time across a restart that lost the clock is told.
LOST_CLOCK = "not judged, the clock being unknown"
#: Findings that say enough time passed for something that did not happen (a lease run out,
#: a retention over): after a restart that may have set the target's clock back, the
#: harness's account of that time may be ahead of the target's, and such a finding false.
#: (Findings that say too little time passed for what happened cannot be made false so.)
ELAPSED_TIME_MECHANISMS = frozenset({"stuck", "stuck-after-charge", "never-answered",
                                     "expired-keys-kept"})


def _doubt_lost_clock(result: PropertyResult, view: View) -> PropertyResult:
    """Set aside the findings whose evidence rests on elapsed time across the restart that
    left the target's clock unknown: each becomes an undecided note naming the missing
    setting, so the property is unknown, never a (safety) finding."""
    doubted = [f for f in result.findings if f.mechanism in ELAPSED_TIME_MECHANISMS
               and view.spans_lost_clock(f.events, keyless=f.key is None)]
    if not doubted:
        return result
    firm = tuple(f for f in result.findings if f not in doubted)
    notes = tuple(result.notes) + tuple(
        Note(f.property, f.key, f"{LOST_CLOCK}: {f.message}; but {view.lost_clock_reason()}",
             {"lost_clock": True, "finding": f.to_json()}, undecided=True)
        for f in doubted)
    if firm:
        return replace(result, findings=firm, notes=notes)
    undecided = [n.message for n in notes if n.undecided]
    return replace(result, verdict="unknown", findings=(), notes=notes,
                   reason="; ".join(undecided))


def _doubt_moved_clock(result: PropertyResult, view: View) -> tuple[PropertyResult, list[Finding]]:
    """Set aside the findings whose evidence needs a clock jump made while one of their
    requests ran: each becomes a note saying so (the verdict no longer fails for it)."""
    doubted = [f for f in result.findings if view.moved_while_running(f.events)]
    if not doubted:
        return result, []
    firm = tuple(f for f in result.findings if f not in doubted)
    notes = tuple(result.notes) + tuple(
        Note(f.property, f.key,
             f"{MOVED_CLOCK}: {f.message} (the target's clock was moved while a request of this "
             "key ran, and a jump is not elapsed time for the target's own timers, such as a "
             "lease renewed while the handler runs; only real time can confirm it)",
             {"moved_clock": True, "finding": f.to_json()})
        for f in doubted)
    if firm:
        return replace(result, findings=firm, notes=notes), doubted
    undecided = [n.message for n in notes if n.undecided]
    verdict: Verdict = "unknown" if undecided else "pass"
    return replace(result, verdict=verdict, findings=(), notes=notes,
                   reason="; ".join(undecided) or None), doubted

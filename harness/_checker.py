"""The checker: the single judge.  Properties are plain functions registered under their ids;
``check_history`` runs them all over one history and merges their verdicts.

A property that crashes, or cannot decide (an effects query failed), yields ``unknown`` rather
than a guess: Jepsen's ``check-safe``.
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from harness._analysis import View
from harness._errors import UsageError
from harness._findings import Finding, Klass, Note, Verdict, klass_of, merge_verdicts, sort_findings
from harness._history import Event
from harness._target import (
    KeylessCounting,
    KeySpec,
    Promises,
    Target,
    keyless_counting,
    split_route,
)

__all__ = [
    "PROPERTIES",
    "QUEUE_PROPERTIES",
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
    #: An HTTP service's history, or a queue consumer's (judged by ``QUEUE_PROPERTIES``).
    kind: Literal["http", "consumer"] = "http"

    @classmethod
    def for_target(cls, target: Target, retry_horizon: float = 86400.0) -> CheckOptions:
        operations = tuple((o.method.upper(), o.path) for o in target.keyed_operations)
        kind: Literal["http", "consumer"] = (
            "consumer" if getattr(target, "kind", "http") == "consumer" else "http")
        return cls(target.promises, retry_horizon, target.key,
                   keyless_counting(target.effects), operations, kind)

    def declares(self, method: str | None, path: str | None) -> bool:
        """Is ``method path`` (query string aside) an operation the target says is keyed?  An
        answer on any other route says nothing about the idempotency layer."""
        return not self.operations or split_route(method, path)[:2] in self.operations


PropertyCheck = Callable[[View, CheckOptions], Iterable[Finding | Note]]
Summary = Callable[[View, CheckOptions], dict[str, Any]]


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

    def __init__(self, module: str = "harness._properties") -> None:
        self._specs: dict[str, PropertySpec] = {}
        self._module = module
        self._summary: Summary | None = None

    def summarise(self, summary: Summary) -> Summary:
        """Register the tally kept beside the verdicts (a queue consumer's queue account)."""
        self._summary = summary
        return summary

    def summary(self, view: View, options: CheckOptions) -> dict[str, Any]:
        self._registered()
        return self._summary(view, options) if self._summary is not None else {}

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
        """The specs, P1-P11 among them: ``harness._properties`` registers those when it is
        imported, which happens on first use rather than at ``import harness`` so that the
        package stays cheap to import (every pytest run imports it, through the plugin)."""
        importlib.import_module(self._module)
        return self._specs

    def specs(self) -> list[PropertySpec]:
        return [self._specs[i] for i in self.ids()]


def _origin(spec: PropertySpec) -> tuple[str, str]:
    return (spec.check.__module__, spec.check.__qualname__)


PROPERTIES = Registry()
#: The same property ids judged over a queue consumer's history (harness/consumer/_properties.py).
QUEUE_PROPERTIES = Registry("harness.consumer._properties")


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
    #: What the checker tallied beside its verdicts, for reports (a queue consumer's queue
    #: account, harness/consumer/_account.py); empty for an HTTP service.
    summary: dict[str, Any] = field(default_factory=dict)

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
    registry = QUEUE_PROPERTIES if options.kind == "consumer" else PROPERTIES
    chosen = [registry[p] for p in properties] if properties else registry.specs()
    results = {spec.id: _check_safe(spec, view, options) for spec in chosen}
    findings = sort_findings(f for r in results.values() for f in r.findings)
    notes = [n for r in results.values() for n in r.notes]
    summary = (registry.summary(view, options) if properties is None
               else {})  # a partial check is no account of the run
    return CheckResult(results, findings, notes, summary)

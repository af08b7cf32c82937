"""What the checker concludes: findings, notes and verdicts, as data.

Findings (a property broke), notes (worth knowing, not a failure) and verdicts.  Findings are
data, never exceptions; reports only render them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "SAFETY_PROPERTIES",
    "Finding",
    "Klass",
    "Note",
    "Verdict",
    "klass_of",
    "merge_verdicts",
    "sort_findings",
]

Klass = Literal["safety", "conformance"]
Verdict = Literal["pass", "fail", "unknown", "n/a"]

#: The properties whose breach costs money or leaks data (../shared/DESIGN.md).
SAFETY_PROPERTIES = frozenset({"P1", "P2", "P8", "P9"})

_VERDICT_PRIORITY: dict[Verdict, int] = {"fail": 3, "unknown": 2, "pass": 1, "n/a": 0}


def klass_of(property_id: str) -> Klass:
    return "safety" if property_id in SAFETY_PROPERTIES else "conformance"


@dataclass(frozen=True, slots=True)
class Finding:
    """A property that did not hold, for one key, with the smallest events that show it.

    ``mechanism`` names how the evidence shows it broke (``concurrent-copies``,
    ``stuck-after-charge``...), in words that do not depend on keys or timings: two findings
    of one property with different mechanisms are two flaws, which the explorer reports apart
    (docs/explorer.md, "Distinct failures")."""

    property: str
    key: str | None
    message: str
    events: tuple[int, ...] = ()
    reproduce: str = ""
    mechanism: str = ""
    klass: Klass = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "klass", klass_of(self.property))

    def to_json(self) -> dict[str, Any]:
        return {
            "property": self.property,
            "class": self.klass,
            "key": self.key,
            "mechanism": self.mechanism,
            "message": self.message,
            "events": list(self.events),
            "reproduce": self.reproduce,
        }


@dataclass(frozen=True, slots=True)
class Note:
    """Something the report should say that is not a failure: a measurement, a draft deviation,
    a second charge that the retention contract allows.  An ``undecided`` note is evidence that
    could not decide (a lease that had not passed, an oracle that cannot count): without a
    finding beside it, it makes the property's verdict unknown, with the note as the reason."""

    property: str
    key: str | None
    message: str
    data: dict[str, Any] = field(default_factory=dict)
    undecided: bool = False

    def to_json(self) -> dict[str, Any]:
        shown = {"property": self.property, "key": self.key, "message": self.message,
                 "data": self.data}
        return {**shown, "undecided": True} if self.undecided else shown


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Safety first, then by property and key; one finding per (property, key, message)."""
    unique = {(f.property, f.key, f.message): f for f in findings}
    return sorted(
        unique.values(),
        key=lambda f: (f.klass != "safety", int(f.property[1:]), f.key or "", f.message),
    )


def merge_verdicts(verdicts: Iterable[Verdict]) -> Verdict:
    """fail beats unknown beats pass; all n/a (or nothing) stays n/a."""
    return max(verdicts, key=lambda v: _VERDICT_PRIORITY[v], default="n/a")

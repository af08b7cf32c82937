"""What makes two failing stories two flaws, not one flaw told twice.

A finding names its property and its mechanism (``Finding.mechanism``: how the evidence shows
the property broke, in words free of keys and timings).  One flaw breaks several properties on
one key at once: a fingerprint that leaves out the tenant replays another tenant's charge (P8)
and so answers 2xx for a key nothing charged (P2); a commit split in two runs a crashed
request again (P9) and so charges twice (P1).  The *cause* is the property that says why, and
the outcome properties (P1 a duplicate, P2 a lost outcome) are what every flaw ends in.  So a
key's **kind** is its finding whose property comes first in ``PRECEDENCE`` (causes before
outcomes), with that finding's mechanism; a story's kinds are its keys' kinds (a finding about
no key, P6's horizon or P11's table, is a kind of its own).

Two failures are distinct when one has a kind the other has not.  Variants of one flaw (other
keys, other timings, another consequence on the same key) share their kinds and are one
failure; two flaws never share a kind, since a kind is a property with a mechanism.

A duplicate whose mechanism is a rerun after the server died (P1 ``rerun-after-crash``) is
crash safety's (P9 ``charged-again-after-incident``) by its very words: the explorer judges P9
only once a story's clients have settled, so a story that fails at a step shows the P1 alone,
and the two must not count as two flaws.  ``SAME_MECHANISM`` names such pairs.

A finding seen only with a moved clock fails nothing by itself, but it still tells its key's
cause: a key whose firm finding is a lost outcome (P2) and whose finding seen with a moved
clock is the other tenant's answer (P8) is a P8 key, not a P2 one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from harness.judging._findings import Finding, klass_of

__all__ = ["PRECEDENCE", "SAME_MECHANISM", "Kind", "kinds_of", "label"]

#: Which property names a key's kind when several broke on it: the causes first (tenant scope,
#: fingerprint, crash safety, retention, in-flight handling, replay, bad input, storage, the
#: missing key), the outcomes every flaw ends in last (P1 before P2: a duplicate's mechanism
#: says how it ran twice, and a lost outcome is the vaguer of the two).
PRECEDENCE = ("P8", "P4", "P9", "P6", "P5", "P3", "P10", "P11", "P7", "P1", "P2")


class Kind(NamedTuple):
    """A property with the mechanism the evidence shows: ``P9 stuck-after-charge``."""

    property: str
    mechanism: str

    def __str__(self) -> str:
        return f"{self.property} {self.mechanism}".rstrip()


#: Kinds that tell one mechanism in two properties' words, each read as the second.
SAME_MECHANISM: dict[Kind, Kind] = {
    Kind("P1", "rerun-after-crash"): Kind("P9", "charged-again-after-incident"),
    Kind("P1", "rerun-after-incident"): Kind("P9", "ran-again-after-incident"),  # a consumer
}


def _kind(finding: Finding) -> Kind:
    kind = Kind(finding.property, finding.mechanism)
    return SAME_MECHANISM.get(kind, kind)


def _rank(finding: Finding) -> int:
    prop = _kind(finding).property
    return PRECEDENCE.index(prop) if prop in PRECEDENCE else len(PRECEDENCE)


def kinds_of(findings: Iterable[Finding], doubted: Iterable[Finding] = ()) -> frozenset[Kind]:
    """The kinds ``findings`` show: each of their keys' cause (``PRECEDENCE``), found among
    ``findings`` and the ``doubted`` ones (seen only with a moved clock) of that key, and
    every finding about no key as a kind of its own."""
    firm = list(findings)
    keys = {f.key for f in firm if f.key is not None}
    by_key: dict[str, Finding] = {}
    kinds: set[Kind] = set()
    for finding in [*firm, *(d for d in doubted if d.key in keys)]:
        if finding.key is None:
            kinds.add(_kind(finding))
            continue
        kept = by_key.get(finding.key)
        if kept is None or _rank(finding) < _rank(kept):
            by_key[finding.key] = finding
    kinds.update(_kind(f) for f in by_key.values())
    return frozenset(kinds)


def label(kinds: Iterable[Kind]) -> str:
    """Kinds in words, safety first: ``P9 stuck-after-charge, P4 reuse-replayed:body``."""
    ordered = sorted(kinds, key=lambda k: (klass_of(k.property) != "safety",
                                           int(k.property[1:]), k.mechanism))
    return ", ".join(str(k) for k in ordered)

"""What Hypothesis draws from, per target: bodies, keys, faults, clock jumps, crash points.

Each strategy lists its ordinary values first, so shrinking moves towards the plain case and a
shrunk story keeps only the oddities that matter.  Numbers stay inside what every JSON parser
reads exactly (RFC 8785 / I-JSON: integers up to 2^53 - 1, finite doubles), so the harness and
the target always agree on what "the same body" means.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Literal

from hypothesis import strategies as st

from harness._nemesis import FAULTS
from harness._properties import LEASE_SLACK
from harness._target import Target, render_template
from harness.explore._actions import Change, Spelling
from harness.explore._keys import HostileKind, hostile_kinds

__all__ = ["AGAIN", "PAST_THE_LEASE", "Again", "Draft", "KeyChoice", "Strategies"]

MAX_SAFE_INTEGER = 2**53 - 1
#: How far past the promised lease a jump goes: beyond the checker's slack for clock skew.
PAST_THE_LEASE = LEASE_SLACK + 3.0
#: Amounts a charge endpoint must accept: the smallest, a 32-bit edge, the largest exact one.
BOUNDARY_AMOUNTS = (1, 2**31, MAX_SAFE_INTEGER)
#: Amounts it must refuse: zero, negative, fractional, huge and tiny doubles.
ODD_AMOUNTS = (0, -1, 0.5, 1e308, 5e-324)

#: Which earlier operation or key a step refers to, counted back from the most recent: mostly
#: the last one, since that is where a retry or a reuse usually follows.
RECENT_FIRST = (0, 0, 0, 1, 2, 3)

#: How an earlier operation is sent again: mostly a plain retry, then the respelled retries,
#: then the reuses.
AGAIN: tuple[Spelling | Change, ...] = ("as-sent", "as-sent", "keys-reversed", "reindented",
                                        "escaped", "body", "path", "method")

ChoiceShape = Literal["plain", "longest", "case-twin", "sibling", "shared", "hostile"]


@dataclass(frozen=True)
class Draft:
    """A new request as drawn: its tenant, its key, its body."""

    tenant: str
    key: KeyChoice
    body: Any


@dataclass(frozen=True)
class Again:
    """An earlier operation sent again (``pick`` counts back from the most recent): ``how``
    is a retry's spelling or a reuse's change; ``body`` is the reuse's other body."""

    pick: int
    how: Spelling | Change
    body: Any


@dataclass(frozen=True)
class KeyChoice:
    """A drawn key: its shape, which earlier key it relates to (counted from the most recent),
    the drawn text (a plain key's tail, a longest key's fill) and how a hostile key is bad."""

    shape: ChoiceShape
    pick: int
    text: str
    kind: HostileKind


def _clock_steps(target: Target) -> list[tuple[float, str]]:
    """Clock jumps that land somewhere that matters: past the lease, a few minutes, inside the
    retention, past it.  Integers that never add up to the retention, so the harness's and the
    target's clocks never disagree about which side of it a retry falls."""
    promises = target.promises
    steps: list[tuple[float, str]] = []
    if promises.lease is not None:
        steps.append((promises.lease + PAST_THE_LEASE, "past the lease"))
    retention = promises.retention
    if retention is None:
        return [*steps, (700.0, "a few minutes"), (21_600.0, "six hours"),
                (172_800.0, "two days")]
    if retention > 1400:
        steps.append((700.0, "a few minutes"))
    margin = float(max(60, int(retention // 24)))
    steps += [(float(int(retention * 0.4)), "well within the retention"),
              (retention - margin, "just within the retention"),
              (retention + margin, "past the retention")]
    return steps


class Strategies:
    """The strategies for one target, built once per exploration."""

    def __init__(self, target: Target) -> None:
        self.target = target
        tenants = ["a", "b"] if target.tenant is not None else ["a"]
        self.tenants = st.sampled_from(tenants)
        self.bodies = self._bodies()
        self.ordinary_bodies = self._ordinary_bodies()
        plain: list[ChoiceShape] = ["plain"] * 5
        shapes = [*plain, "longest", "case-twin", "sibling", "hostile"]
        if target.tenant is not None:
            shapes += ["shared", "shared"]  # the other tenant, the same key
        self.drafts = st.builds(Draft, self.tenants, self._keys(shapes), self.bodies)
        self.agains = st.builds(Again, st.sampled_from(RECENT_FIRST), st.sampled_from(AGAIN),
                                self.bodies)
        self.faults = st.sampled_from([name for name, fault in FAULTS.items()
                                       if fault.where == "client" or target.store_proxy])
        self.clock_steps = _clock_steps(target)
        crash = target.hooks.crash
        self.crash_points = (list(crash.points) if crash and crash.header else ["in-flight"])

    def _bodies(self) -> st.SearchStrategy[Any]:
        amounts = st.one_of(st.integers(1, 99_999), st.integers(1, 99_999),
                            st.sampled_from(BOUNDARY_AMOUNTS), st.integers(1, MAX_SAFE_INTEGER),
                            st.sampled_from(ODD_AMOUNTS))
        text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
        scalars = st.one_of(st.none(), st.booleans(), text,
                            st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
                            st.floats(allow_nan=False, allow_infinity=False))
        nested = st.dictionaries(text, st.recursive(
            scalars, lambda inner: st.lists(inner, min_size=1, max_size=3)
            | st.dictionaries(text, inner, min_size=1, max_size=3), max_leaves=6),
            min_size=1, max_size=3)
        metadata = st.one_of(st.none(), st.none(), st.none(), st.none(), nested)
        nonces = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
        return st.builds(self._render, amounts, nonces, text, metadata)

    def _ordinary_bodies(self) -> st.SearchStrategy[Any]:
        """Bodies a target accepts: for a request that outlives its lease, where the checker
        can only tell a takeover from a second execution by a 2xx (P5 counts any other answer
        to a retry of a running request as a breach)."""
        return st.builds(self._render, st.integers(1, 99_999),
                         st.text(string.ascii_lowercase, min_size=1, max_size=8),
                         st.text(string.ascii_letters, max_size=8), st.none())

    def _render(self, amount: float, nonce: str, customer: str, metadata: Any) -> Any:
        """The target's body template filled with drawn values; extra nested metadata when
        drawn (a target that refuses unknown fields answers 4xx, which it must replay too)."""
        body = render_template(self.target.endpoint.body,
                               {"amount": amount, "nonce": nonce, "customer": customer})
        if metadata is not None and isinstance(body, dict):
            body["metadata"] = metadata
        return body

    def _keys(self, shapes: list[ChoiceShape]) -> st.SearchStrategy[KeyChoice]:
        spec = self.target.key
        syntax_safe = "".join(c for c in string.printable[:94]
                              if spec.syntax == "sf-string" or c not in '"\\')
        return st.builds(
            KeyChoice,
            st.sampled_from(shapes),
            st.sampled_from(RECENT_FIRST),
            st.text(syntax_safe, max_size=6),
            st.sampled_from(hostile_kinds(spec)),
        )

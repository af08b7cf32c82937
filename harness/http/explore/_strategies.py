"""What Hypothesis draws from for an HTTP service: bodies, keys, faults, clock jumps, crash points.

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

from harness._target import Target
from harness.explore._keys import HostileKind, hostile_kinds, odd_kinds
from harness.explore._strategies import RECENT_FIRST, clock_steps
from harness.http._nemesis import FAULTS
from harness.http.explore._actions import Change, Spelling
from harness.http.explore._bodies import Fill, render

__all__ = ["AGAIN", "OVERLAP_FRACTIONS", "Again", "BadBody", "Draft", "KeyChoice", "Strategies"]

#: Amounts a charge endpoint must refuse: zero, negative, fractional, huge and tiny doubles.
#: Drawn only for the hostile-body step (P10), never for an ordinary request: a service may
#: refuse a bad body before it claims the key, and its answers then say nothing about replay.
#: Ordinary amounts: ones every charge endpoint accepts (no 32-bit or 2^53 edges, which a
#: correct service may refuse as too large).
ORDINARY_AMOUNTS = (1, 99_999)

#: How an earlier operation is sent again: mostly a plain retry, then the respelled retries,
#: then the reuses (another body; another declared operation in the key space, when the target
#: declares one, else another body).
AGAIN: tuple[Spelling | Change, ...] = ("as-sent", "as-sent", "keys-reversed", "reindented",
                                        "escaped", "body", "field", "field", "operation",
                                        "query")
#: When, as a fraction of the target's measured latency, an overlapping second request
#: leaves after the original.
OVERLAP_FRACTIONS = (0.1, 0.25, 0.5)

ChoiceShape = Literal["plain", "longest", "case-twin", "sibling", "shared", "hostile", "odd"]


@dataclass(frozen=True)
class Draft:
    """A new request as drawn: its tenant, its key, its body."""

    tenant: str
    key: KeyChoice
    body: Any


@dataclass(frozen=True)
class Again:
    """An earlier operation sent again (``pick`` counts back from the most recent): ``how``
    is a retry's spelling or a reuse's change; ``fill`` makes the reuse's other body."""

    pick: int
    how: Spelling | Change
    fill: Fill
    #: For a reuse of one field: which field (among ``fields_to_vary``) and which of its
    #: changes (``field_changes``); None, as Hypothesis draws it: ``pick`` chooses both.
    variant: tuple[int, int] | None = None


@dataclass(frozen=True)
class BadBody:
    """A body the target must refuse, and what is wrong with it."""

    tenant: str
    body: Any
    why: str


@dataclass(frozen=True)
class KeyChoice:
    """A drawn key: its shape, which earlier key it relates to (counted from the most recent),
    the drawn text (a plain key's tail, a longest key's fill) and how a hostile or odd key is
    unusual."""

    shape: ChoiceShape
    pick: int
    text: str
    kind: HostileKind | None = None


class Strategies:
    """The strategies for one target, built once per exploration."""

    def __init__(self, target: Target, *, writes_per_charge: int = 0) -> None:
        self.target = target
        #: The committed writes an ordinary charge makes, as the store proxy saw them (0: it
        #: sees none, or the target has no proxy that reads its store's protocol).
        self.writes_per_charge = writes_per_charge
        #: The keys the target's declared rules refuse, and the odd ones they accept.
        self.hostile_kinds = hostile_kinds(target.key)
        self.odd_kinds = odd_kinds(target.key)
        tenants = ["a", "b"] if target.tenant is not None else ["a"]
        self.tenants = st.sampled_from(tenants)
        self.fills = self._fills()
        self.bodies = self.fills.map(self.body)
        self.ordinary_bodies = self._ordinary_bodies()
        self.bad_bodies = self._bad_bodies()
        self.drafts = st.builds(Draft, self.tenants, self._keys(), self.bodies)
        self.agains = st.builds(Again, st.sampled_from(RECENT_FIRST), st.sampled_from(AGAIN),
                                self.fills)
        self.faults = st.sampled_from([name for name, fault in FAULTS.items()
                                       if fault.where == "client" or target.store_proxy])
        self.clock_steps = clock_steps(lease=target.promises.lease,
                                       retention=target.promises.retention)
        crash = target.hooks.crash
        self.crash_points = (list(crash.points) if crash and crash.header else ["in-flight"])
        self.handler_faults = [f.name for f in target.hooks.handler_faults]
        self.fractions = st.sampled_from(OVERLAP_FRACTIONS)

    def body(self, fill: Fill) -> Any:
        """The primary operation's body template filled with ``fill``."""
        return render(self.target.endpoint, fill)

    def _fills(self) -> st.SearchStrategy[Fill]:
        amounts = st.one_of(st.integers(*ORDINARY_AMOUNTS), st.sampled_from(ORDINARY_AMOUNTS))
        text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
        nonces = st.text(string.ascii_lowercase + string.digits, min_size=1, max_size=8)
        return st.builds(Fill, amounts, nonces, text)

    def _ordinary_bodies(self) -> st.SearchStrategy[Any]:
        """Plain bodies: for a request that outlives its lease, where the checker can only
        tell a takeover from a second execution by a 2xx (P5 counts any other answer to a
        retry of a running request as a breach)."""
        return st.builds(Fill, st.integers(*ORDINARY_AMOUNTS),
                         st.text(string.ascii_lowercase, min_size=1, max_size=8),
                         st.text(string.ascii_letters, max_size=8)).map(self.body)

    def _bad_bodies(self) -> st.SearchStrategy[BadBody] | None:
        """An ordinary body with one field set to a value the target file says it refuses
        (``[endpoint] invalid_values``); None when it declares none: what is invalid is the
        service's to say, and a guess would be a false finding."""
        declared = [(field, value) for field, values in
                    self.target.endpoint.invalid_values.items() for value in values]
        if not declared:
            return None

        def bad(tenant: str, fill: Fill, change: tuple[str, Any]) -> BadBody:
            field, value = change
            body = self.body(fill)
            if isinstance(body, dict):
                body = {**body, field: value}
            return BadBody(tenant, body, f"body {field}={value!r}")

        return st.builds(bad, self.tenants, self.fills, st.sampled_from(declared))

    def _keys(self) -> st.SearchStrategy[KeyChoice]:
        """Mostly plain keys, then the edge cases; hostile keys only of kinds the declared key
        rules refuse, odd ones only of kinds they accept."""
        spec = self.target.key
        kinds: dict[str, list[HostileKind]] = {"hostile": self.hostile_kinds,
                                               "odd": self.odd_kinds}
        plain: list[ChoiceShape] = ["plain"] * 5
        shapes: list[ChoiceShape] = [*plain, "longest", "case-twin", "sibling"]
        unusual: tuple[ChoiceShape, ...] = ("hostile", "odd")
        shapes += [shape for shape in unusual if kinds[shape]]
        if self.target.tenant is not None:
            shapes += ["shared", "shared"]  # the other tenant, the same key
        syntax_safe = "".join(c for c in string.printable[:94]
                              if spec.syntax == "sf-string" or c not in '"\\')

        def choice(shape: ChoiceShape) -> st.SearchStrategy[KeyChoice]:
            kind = st.sampled_from(kinds[shape]) if shape in kinds else st.none()
            return st.builds(KeyChoice, st.just(shape), st.sampled_from(RECENT_FIRST),
                             st.text(syntax_safe, max_size=6), kind)

        return st.sampled_from(shapes).flatmap(choice)

"""Idempotency keys as a story plans them, and the concrete strings they become.

A story names its keys (``k1``, ``k2``) by the shape that makes each one interesting: the
longest the target allows, an earlier key in the other letter case, a long key that differs
from another only in its last character, a key the target must refuse, an odd key its rules
accept.  The concrete string is made fresh for every example and every replay (a unique
prefix), so examples never share a key and a saved story replays against a target that still
remembers the keys of the first run.

Which keys are hostile is the target file's to say (``[key]``: syntax, ``max_length``,
``pattern``), not the reference server's: a key the declared rules accept is an ordinary key,
however odd, and judging its refusal under P10 would be a false finding (issue 13).
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from harness._target import KeySpec, encode_key

__all__ = ["HOSTILE_KINDS", "HostileKind", "KeyMaker", "KeyPlan", "Shape", "hostile_kinds",
           "odd_kinds"]

Shape = Literal["plain", "longest", "case-twin", "sibling", "hostile", "odd"]
HostileKind = Literal["empty", "too-long", "control", "non-ascii", "unterminated", "bad-escape",
                      "whitespace"]

#: Why a server must refuse each hostile key, in the story's words.
HOSTILE_KINDS: dict[HostileKind, str] = {
    "empty": "an empty key",
    "too-long": "one character longer than allowed",
    "control": "a control character",
    "non-ascii": "a character outside ASCII",
    "unterminated": "a structured-field string without its closing quote",
    "bad-escape": "a structured-field string with an escape other than \\\" and \\\\",
}
#: What makes each odd (but accepted) key odd, in the story's words.
ODD_KINDS: dict[HostileKind, str] = {
    "too-long": "a very long key (no length limit is declared)",
    "non-ascii": "a character outside ASCII (the declared rules allow it)",
    "whitespace": "spaces around it (the declared rules allow spaces; HTTP strips them from a "
                  "header value, so the service may see the key without them)",
}
_SF_ONLY: frozenset[HostileKind] = frozenset({"unterminated", "bad-escape"})
#: The length of a "longest" key when the target declares no limit (a common one).
LONG_KEY = 255
#: The length of a "too-long" key the rules accept because they declare no limit.
VERY_LONG_KEY = 1024
#: A stand-in prefix: planning asks the rules about keys shaped like the ones a story makes.
_SKETCH_PREFIX = "k" + "0" * 10


def _sample(spec: KeySpec, kind: HostileKind) -> str:
    return KeyMaker(spec, prefix=_SKETCH_PREFIX).odd_key(kind, f"{_SKETCH_PREFIX}-k1")


def hostile_kinds(spec: KeySpec) -> list[HostileKind]:
    """The hostile keys the target's declared rules reject: a too-long key only under a length
    limit, an empty, control or non-ASCII key only when the length or pattern rules refuse it,
    the malformed structured-field strings only under that syntax (which they break)."""
    kinds: list[HostileKind] = []
    for kind in HOSTILE_KINDS:
        if kind in _SF_ONLY:
            refused = spec.syntax == "sf-string"
        elif kind == "too-long":
            refused = spec.max_length > 0
        elif kind == "non-ascii":
            refused = spec.refuses_non_ascii
        else:
            refused = not spec.accepts(_sample(spec, kind))
        if refused:
            kinds.append(kind)
    return kinds



def odd_kinds(spec: KeySpec) -> list[HostileKind]:
    """Odd keys the declared rules accept: sent as ordinary operations (``odd-key:<kind>``).

    An empty or control-character key is never sent as an ordinary key, even when no pattern
    forbids it: HTTP frameworks read an empty header as no key and refuse control characters
    in a header (RFC 9110 section 5.5) before the service sees them, so the answer would say
    nothing about the service.  A non-ASCII key is sent only where the file says any value is a
    key (``charset = "any"``).  A key with spaces around it is sent only where the rules
    accept it with them: HTTP strips surrounding whitespace from a header value (RFC 9110
    section 5.5), so a refusal by the rules could never be expected of the service."""
    refused = hostile_kinds(spec)
    return [k for k in ODD_KINDS if k not in refused
            and (k != "non-ascii" or spec.allows_non_ascii)
            and (k != "whitespace" or spec.accepts(_sample(spec, k)))]


class KeyPlan(BaseModel):
    """A new key of a story: its name, its shape, and what the shape needs.

    ``text`` is the drawn tail of a plain key or the fill character of a longest one; ``of``
    names the earlier key a twin or sibling is made from; ``kind`` says how a hostile or odd
    key is unusual.  An existing key (the same key under another tenant) is a plan with only a
    ``name``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    shape: Shape | None = None
    of: str | None = None
    text: str = ""
    kind: HostileKind | None = None

    @model_validator(mode="after")
    def _complete(self) -> KeyPlan:
        if self.shape in ("case-twin", "sibling") and self.of is None:
            raise ValueError(f"a {self.shape} key needs `of`, the key it is made from")
        if self.shape == "hostile" and self.kind is None:
            raise ValueError(f"a hostile key needs `kind`, one of {', '.join(HOSTILE_KINDS)}")
        if self.shape == "odd" and self.kind not in ODD_KINDS:
            raise ValueError(f"an odd key needs `kind`, one of {', '.join(ODD_KINDS)}")
        if self.shape == "longest" and len(self.text) != 1:
            raise ValueError("a longest key needs `text`, the one character it is filled with")
        return self

    @property
    def hostile(self) -> bool:
        return self.shape == "hostile"

    @property
    def label(self) -> str:
        """What the checker reads: ``hostile:<kind>`` (P10), ``odd-key:<kind>`` (ordinary)."""
        if self.shape in ("hostile", "odd"):
            return f"{'hostile' if self.shape == 'hostile' else 'odd-key'}:{self.kind}"
        return ""

    def describe(self) -> str:
        """``k2 = k1 in the other letter case``: the shape in words, for the story's legend."""
        match self.shape:
            case "plain":
                return f"{self.name}: a fresh key"
            case "longest":
                return f"{self.name}: a fresh key of the longest length allowed"
            case "case-twin":
                return f"{self.name}: {self.of} in the other letter case"
            case "sibling":
                return (f"{self.name}: {self.of} filled to the longest length allowed, its last "
                        "character changed")
            case "hostile":
                assert self.kind is not None
                return f"{self.name}: a key the target must refuse: {HOSTILE_KINDS[self.kind]}"
            case "odd":
                assert self.kind is not None
                return f"{self.name}: an odd key the target's rules accept: {ODD_KINDS[self.kind]}"
        return f"{self.name}: an existing key"


#: What separates a key's unique base from the tail or fill a plan adds to it.
TAIL = "-"


class KeyMaker:
    """Makes the concrete keys of one example: a unique prefix (starting with a letter, so a
    key always has another letter case) and the target's key syntax, length and pattern.

    ``prefix`` is for planning only: the planner makes the same shapes with a fixed prefix to
    ask the declared rules about them before it draws a step."""

    def __init__(self, spec: KeySpec, *, prefix: str | None = None) -> None:
        self.spec = spec
        self.prefix = prefix or "k" + uuid.uuid4().hex[:10]
        self.keys: dict[str, str] = {}

    @property
    def longest(self) -> int:
        return self.spec.max_length or LONG_KEY

    def make(self, plan: KeyPlan) -> tuple[str, str | None]:
        """The key for ``plan`` and, for a hostile or odd key, the header value to send
        verbatim."""
        if plan.shape is None:
            return self.keys[plan.name], None
        header = None
        if plan.shape in ("hostile", "odd"):
            assert plan.kind is not None
            key, header = self._unusual(plan.kind, self._base(plan))
        else:
            key = self._wellformed(plan)
        self.keys[plan.name] = key
        return key, header

    def accepted(self, plan: KeyPlan) -> bool:
        """Would the target's declared rules accept the key ``plan`` makes (and is it another
        key than the one it derives from)?  Makes nothing: the planner asks before drawing."""
        try:
            key = self._wellformed(plan)
        except KeyError:
            return False
        return self.spec.accepts(key) and key != self.keys.get(plan.of or "")

    def _base(self, plan: KeyPlan) -> str:
        """A unique key named after the plan, or a UUID when the rules refuse that form (a
        service may insist on UUIDs), cut to the length allowed."""
        for candidate in (f"{self.prefix}-{plan.name}", str(uuid.uuid4()), uuid.uuid4().hex):
            if self.spec.accepts(candidate):
                return candidate
        return f"{self.prefix}-{plan.name}"[: self.longest]

    def _fill(self, key: str, fill: str) -> str:
        return (key + fill * self.longest)[: self.longest]

    def _wellformed(self, plan: KeyPlan) -> str:
        # A tail or a fill follows a dash: "k1" with the tail "0" must not be "k10", another
        # plan's key (no base is then the start of another's key).
        if plan.shape == "plain":
            base = self._base(plan)
            tailed = (f"{base}{TAIL}{plan.text}" if plan.text else base)[: self.longest]
            return tailed if self.spec.accepts(tailed) else base
        if plan.shape == "longest":
            return self._fill(self._base(plan) + TAIL, plan.text)
        assert plan.of is not None
        earlier = self.keys[plan.of]
        if plan.shape == "case-twin":
            return earlier.swapcase()
        padded = self._fill(earlier, "0")
        return padded[:-1] + ("0" if padded[-1] != "0" else "1")

    def odd_key(self, kind: HostileKind, base: str) -> str:
        """The key string of a hostile or odd ``kind``, before encoding."""
        return self._unusual(kind, base)[0]

    def _unusual(self, kind: HostileKind, base: str) -> tuple[str, str]:
        syntax = self.spec.syntax
        if kind == "unterminated":
            return '"' + base, '"' + base
        if kind == "bad-escape":
            return base + "\\x", '"' + base + '\\x"'
        limit = self.spec.max_length
        key = {
            "empty": "",
            "too-long": ((base + "x" * limit)[: limit + 1] if limit
                         else (base + "x" * VERY_LONG_KEY)[:VERY_LONG_KEY]),
            "control": base + "\x01",
            "non-ascii": base + "é",
            "whitespace": f" {base} ",
        }[kind]
        return key, encode_key(key, syntax)

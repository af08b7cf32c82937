"""Idempotency keys as a story plans them, and the concrete strings they become.

A story names its keys (``k1``, ``k2``) by the shape that makes each one interesting: the
longest the target allows, an earlier key in the other letter case, a long key that differs
from another only in its last character, a key the target must refuse.  The concrete string is
made fresh for every example and every replay (a unique prefix), so examples never share a key
and a saved story replays against a target that still remembers the keys of the first run.
"""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from harness._client import encode_key
from harness._target import KeySpec

__all__ = ["HOSTILE_KINDS", "HostileKind", "KeyMaker", "KeyPlan", "Shape", "hostile_kinds"]

Shape = Literal["plain", "longest", "case-twin", "sibling", "hostile"]
HostileKind = Literal["empty", "too-long", "control", "non-ascii", "unterminated", "bad-escape"]

#: Why a server must refuse each hostile key, in the story's words.
HOSTILE_KINDS: dict[HostileKind, str] = {
    "empty": "an empty key",
    "too-long": "one character longer than allowed",
    "control": "a control character",
    "non-ascii": "a character outside ASCII",
    "unterminated": "a structured-field string without its closing quote",
    "bad-escape": "a structured-field string with an escape other than \\\" and \\\\",
}
_SF_ONLY: frozenset[HostileKind] = frozenset({"unterminated", "bad-escape"})


def hostile_kinds(spec: KeySpec) -> list[HostileKind]:
    """The hostile keys that mean something for the target's key syntax."""
    return [k for k in HOSTILE_KINDS if spec.syntax == "sf-string" or k not in _SF_ONLY]


class KeyPlan(BaseModel):
    """A new key of a story: its name, its shape, and what the shape needs.

    ``text`` is the drawn tail of a plain key or the fill character of a longest one; ``of``
    names the earlier key a twin or sibling is made from; ``kind`` says how a hostile key is
    bad.  An existing key (the same key under another tenant) is a plan with only a ``name``.
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
        if self.shape == "longest" and len(self.text) != 1:
            raise ValueError("a longest key needs `text`, the one character it is filled with")
        return self

    @property
    def hostile(self) -> bool:
        return self.shape == "hostile"

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
        return f"{self.name}: an existing key"


class KeyMaker:
    """Makes the concrete keys of one example: a unique prefix (starting with a letter, so a
    key always has another letter case) and the target's key syntax and length."""

    def __init__(self, spec: KeySpec) -> None:
        self.spec = spec
        self.prefix = "k" + uuid.uuid4().hex[:10]
        self.keys: dict[str, str] = {}

    def make(self, plan: KeyPlan) -> tuple[str, str | None]:
        """The key for ``plan`` and, for a hostile key, the header value to send verbatim."""
        if plan.shape is None:
            return self.keys[plan.name], None
        header = None
        if plan.shape == "hostile":
            assert plan.kind is not None
            key, header = self._hostile(plan.kind, self._base(plan))
        else:
            key = self._wellformed(plan)
        self.keys[plan.name] = key
        return key, header

    def _base(self, plan: KeyPlan) -> str:
        return f"{self.prefix}-{plan.name}"

    def _longest(self, key: str, fill: str) -> str:
        return (key + fill * self.spec.max_length)[: self.spec.max_length]

    def _wellformed(self, plan: KeyPlan) -> str:
        if plan.shape == "plain":
            return (self._base(plan) + plan.text)[: self.spec.max_length]
        if plan.shape == "longest":
            return self._longest(self._base(plan), plan.text)
        assert plan.of is not None
        earlier = self.keys[plan.of]
        if plan.shape == "case-twin":
            return earlier.swapcase()
        padded = self._longest(earlier, "~")
        return padded[:-1] + ("0" if padded[-1] != "0" else "1")

    def _hostile(self, kind: HostileKind, base: str) -> tuple[str, str]:
        syntax = self.spec.syntax
        if kind == "unterminated":
            return '"' + base, '"' + base
        if kind == "bad-escape":
            return base + "\\x", '"' + base + '\\x"'
        key = {
            "empty": "",
            "too-long": (base + "x" * self.spec.max_length)[: self.spec.max_length + 1],
            "control": base + "\x01",
            "non-ascii": base + "é",
        }[kind]
        return key, encode_key(key, syntax)

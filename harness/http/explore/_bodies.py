"""Request bodies: the same JSON spelled another way, and a body that is surely another.

A retry may reorder keys, re-indent or escape characters: still the same request, which a
target must replay (P4 says a semantically equal body is the same request).  A reuse must be a
different request in the canonical sense too, or the story would call a retry a reuse.

A body is always an operation's declared template filled with drawn values (``Fill``): a field
the target file does not declare may be refused by a strict schema before the key is claimed,
and the checker would then read that refusal as a breach of the protocol.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import rfc8785

from harness._target import Endpoint, render_template
from harness.http.explore._actions import Spelling

__all__ = ["Fill", "another_body", "canonical", "render", "spell"]


@dataclass(frozen=True)
class Fill:
    """Drawn values for a body template's placeholders."""

    amount: float
    nonce: str
    customer: str


def render(endpoint: Endpoint, fill: Fill) -> Any:
    """``endpoint``'s body template filled with ``fill``."""
    return render_template(endpoint.body, {"amount": fill.amount, "nonce": fill.nonce,
                                           "customer": fill.customer})


def canonical(body: Any) -> bytes:
    """RFC 8785 canonical JSON: what the target's fingerprint compares."""
    return rfc8785.dumps(body)


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


def spell(body: Any, spelling: Spelling) -> bytes | None:
    """The bytes of ``body`` in ``spelling``; None means "as the client always sends it"."""
    if spelling == "as-sent":
        return None
    if spelling == "keys-reversed":
        return json.dumps(_reversed_keys(body), ensure_ascii=False).encode()
    if spelling == "reindented":
        return (json.dumps(_reversed_keys(body), ensure_ascii=False, indent=3) + "\n").encode()
    return json.dumps(body, ensure_ascii=True, separators=(" , ", " : ")).encode()


def another_body(original: Any, candidate: Any) -> Any:
    """``candidate``, changed just enough to differ from ``original`` once canonicalised."""
    if canonical(candidate) != canonical(original):
        return candidate
    if isinstance(candidate, dict):
        amount = candidate.get("amount")
        if isinstance(amount, int) and not isinstance(amount, bool):
            return {**candidate, "amount": amount + 1 if amount < 2**53 - 1 else amount - 1}
        return {**candidate, "reused": True}
    return {"reused": candidate}

"""The request fingerprint: SHA-256 over method, path and the body's RFC 8785 canonical JSON.

Canonical JSON (the ``rfc8785`` library, not a hand-written sort) makes key order, whitespace
and number spelling irrelevant, so a retry that re-serialises the same request still matches
(P4), while any change of value, path or method does not.
"""

from __future__ import annotations

import hashlib
import json

import rfc8785

__all__ = ["InvalidJson", "canonical_json", "fingerprint"]


class InvalidJson(ValueError):
    """The body is not one JSON document this server can canonicalise."""


def _reject_constant(name: str) -> object:
    raise InvalidJson(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)  # made once: cheaper per call


def canonical_json(body: bytes) -> bytes:
    """The canonical form of ``body``; ``InvalidJson`` says what is wrong with it."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidJson("the body is not UTF-8") from None
    try:
        document = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise InvalidJson(f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidJson("the body is nested too deeply") from None
    except ValueError:  # Python's limit on integer digits; the number is not echoed back
        raise InvalidJson("the body holds a number with too many digits") from None
    try:
        return rfc8785.dumps(document)
    except rfc8785.CanonicalizationError as exc:
        raise InvalidJson(f"the body cannot be canonicalised (RFC 8785): {exc}") from None
    except RecursionError:
        raise InvalidJson("the body is nested too deeply") from None


def fingerprint(method: str, path: str, canonical_body: bytes) -> str:
    """SHA-256 of ``METHOD LENGTH:PATH`` and the body: the path's length keeps any path from
    running into the body (a decoded path may hold any character)."""
    encoded_path = path.encode("utf-8")
    head = b"%s %d:%s" % (method.encode("ascii"), len(encoded_path), encoded_path)
    return hashlib.sha256(head + canonical_body).hexdigest()

"""The request fingerprint: SHA-256 over method, path and the body's RFC 8785 canonical JSON.

Canonical JSON (the ``rfc8785`` library, not a hand-written sort) makes key order, whitespace
and number spelling irrelevant, so a retry that re-serialises the same request still matches
(P4), while any change of value, path or method does not.  Documents the standard library's
encoder writes exactly as RFC 8785 does (no floats, ASCII keys) take that faster road; a
property test holds the two to the same bytes.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import rfc8785

__all__ = ["InvalidJson", "canonical_json", "decode_json", "fingerprint"]


class InvalidJson(ValueError):
    """The body is not one JSON document this server can canonicalise."""


def _reject_constant(name: str) -> object:
    raise InvalidJson(f"{name} is not JSON (RFC 8259 has no NaN or Infinity); send a number")


def _one_value_per_name(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """An object whose member names are distinct: with ``{"amount":1,"amount":5000}`` a parser
    keeps one value (Python's the last), so what was charged and what was fingerprinted could
    be read differently by the next parser; RFC 8259 leaves it undefined, so it is refused."""
    document = dict(pairs)
    if len(document) != len(pairs):
        names = [name for name, _ in pairs]
        twice = next(name for number, name in enumerate(names) if name in names[:number])
        raise InvalidJson(f"the member name {json.dumps(twice)} appears more than once in an "
                          "object; send each name once")
    return document


_DECODER = json.JSONDecoder(parse_constant=_reject_constant,  # made once: cheaper per call
                            object_pairs_hook=_one_value_per_name)
# The standard library's C encoder, for documents it spells exactly as RFC 8785 does: about
# twice as fast as ``rfc8785``, which is written in Python, and run on every keyed request.
_PLAIN = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                          check_circular=False)
_LARGEST_INTEGER = 2**53 - 1  # RFC 8785 refuses integers a double cannot hold exactly


def _spelled_alike(value: object) -> bool:
    """Does ``json`` write ``value`` as RFC 8785 does?  Yes without floats (their spelling
    differs: ``1.0``, ``1e+16``), with integers RFC 8785 accepts, and with ASCII keys (sorted by
    code point they are in RFC 8785's UTF-16 order); strings are escaped alike."""
    if value is None or isinstance(value, (str, bool)):
        return True
    if isinstance(value, int):
        return -_LARGEST_INTEGER <= value <= _LARGEST_INTEGER
    if isinstance(value, list):
        return all(_spelled_alike(item) for item in value)
    if isinstance(value, dict):
        return all(key.isascii() and _spelled_alike(item) for key, item in value.items())
    return False


def decode_json(body: bytes) -> Any:
    """``body`` as one JSON document; ``InvalidJson`` says what is wrong with it (not UTF-8,
    not JSON, NaN or Infinity, a member name twice in an object, too deep, too many digits)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidJson("the body is not UTF-8") from None
    try:
        return _DECODER.decode(text)
    except InvalidJson:  # NaN, Infinity or a repeated name: already says which
        raise
    except json.JSONDecodeError as exc:
        raise InvalidJson(f"the body is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidJson("the body is nested too deeply") from None
    except ValueError:  # Python's limit on integer digits; the number is not echoed back
        raise InvalidJson("the body holds a number with too many digits") from None


def canonical_json(body: bytes) -> bytes:
    """The canonical form of ``body``; ``InvalidJson`` says what is wrong with it."""
    document = decode_json(body)
    try:
        if _spelled_alike(document):
            try:
                return _PLAIN.encode(document).encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: RFC 8785 says what is wrong
                pass
        return rfc8785.dumps(document)
    except rfc8785.CanonicalizationError as exc:
        raise InvalidJson(f"the body cannot be canonicalised (RFC 8785): {exc}") from None
    except UnicodeEncodeError:  # rfc8785 sorts keys as UTF-16, which a lone surrogate is not
        raise InvalidJson("the body cannot be canonicalised (RFC 8785): a member name holds "
                          "a lone surrogate (\\ud800-\\udfff not in a pair)") from None
    except RecursionError:
        raise InvalidJson("the body is nested too deeply") from None


def fingerprint(method: str, path: str, canonical_body: bytes) -> str:
    """SHA-256 of ``METHOD LENGTH:PATH`` and the body: the path's length keeps any path from
    running into the body (a decoded path may hold any character)."""
    encoded_path = path.encode("utf-8")
    head = b"%s %d:%s" % (method.encode("ascii"), len(encoded_path), encoded_path)
    return hashlib.sha256(head + canonical_body).hexdigest()

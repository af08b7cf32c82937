"""Reading the ``Idempotency-Key`` header.

The IETF draft makes the key a structured-field string (RFC 8941: ``"8e03..."``, quoted, with
``\\"`` and ``\\\\`` as the only escapes); Stripe-style clients send the bare token.  Both spell the
same key: ``"abc"`` and ``abc`` are one key.  Whatever the spelling, a key is 1 to 255
printable ASCII characters; anything else is rejected before the store sees it.
"""

from __future__ import annotations

import re

__all__ = ["KEY_HEADER", "MAX_KEY_LENGTH", "InvalidKey", "parse_key"]

KEY_HEADER = b"idempotency-key"
MAX_KEY_LENGTH = 255


class InvalidKey(ValueError):
    """The header is present but spells no acceptable key; the message says why."""


def _printable(char: str) -> bool:
    return " " <= char <= "~"


def _unquote(text: str) -> str:
    """The content of an RFC 8941 sf-string (``text`` starts with the opening quote)."""
    chars: list[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            escaped = text[index + 1 : index + 2]
            if escaped not in ('"', "\\"):
                raise InvalidKey('malformed structured-field string: only \\" and \\\\ may be '
                                 "escaped")
            chars.append(escaped)
            index += 2
        elif char == '"':
            if text[index + 1 :]:
                raise InvalidKey("malformed structured-field string: text after the closing "
                                 "quote (parameters are not accepted)")
            return "".join(chars)
        elif not _printable(char):
            raise InvalidKey("the key must be printable ASCII")
        else:
            chars.append(char)
            index += 1
    raise InvalidKey("malformed structured-field string: no closing quote")


_PLAIN_SF_STRING = re.compile(r'"([ !#-\[\]-~]*)"')  # no escapes: the common case, fast
_PRINTABLE = re.compile(r"[ -~]*")


def parse_key(values: list[bytes]) -> str:
    """The key spelled by the header's values (one value expected)."""
    if len(values) != 1:
        raise InvalidKey("send exactly one Idempotency-Key header")
    try:
        text = values[0].decode("ascii").strip(" \t")
    except UnicodeDecodeError:
        raise InvalidKey("the key must be printable ASCII") from None
    if not text.startswith('"'):
        key = text
    elif plain := _PLAIN_SF_STRING.fullmatch(text):
        key = plain.group(1)
    else:
        key = _unquote(text)
    if not key:
        raise InvalidKey("the key is empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(f"the key is longer than {MAX_KEY_LENGTH} characters")
    if not _PRINTABLE.fullmatch(key):
        raise InvalidKey("the key must be printable ASCII")
    return key

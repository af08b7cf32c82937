"""Reading the ``Idempotency-Key`` header.

The IETF draft makes the key a structured-field string (RFC 8941: ``"8e03..."``, quoted, with
``\\"`` and ``\\\\`` as the only escapes); Stripe-style clients send the bare token.  Both spell the
same key: ``"abc"`` and ``abc`` are one key.  Whatever the spelling, a key is 1 to 255
printable ASCII characters; anything else is rejected before the store sees it.  A proxy that
meets two ``Idempotency-Key`` headers may join them into one, ``d2, d3`` (RFC 9110 section 5.3):
a bare key with a comma, or a quoted key followed by one, is several keys, refused as two
separate headers are.  Where no proxy joins values (a query parameter, a message header) a
comma is only a character of the key.
"""

from __future__ import annotations

import re

__all__ = ["KEY_HEADER", "MAX_KEY_LENGTH", "InvalidKey", "parse_key"]

KEY_HEADER = b"idempotency-key"
MAX_KEY_LENGTH = 255


class InvalidKey(ValueError):
    """The header is present but spells no acceptable key; the message says why."""


_SEVERAL = ("several Idempotency-Key values joined with a comma (as a proxy joins repeated "
            "headers): send exactly one key")


def _printable(char: str) -> bool:
    return " " <= char <= "~"


def _unquote(text: str, *, joined: bool) -> str:
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
            if joined and text[index + 1 :].lstrip(" \t").startswith(","):
                raise InvalidKey(_SEVERAL)
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


def parse_key(values: list[bytes], *, http_header: bool = True) -> str:
    """The key spelled by the header's values (one value expected); ``http_header``: they come
    from an HTTP request, whose proxies may have joined two headers into one, and whose
    surrounding whitespace is not part of the value (RFC 9110 section 5.5); otherwise (the
    admin routes' ``key`` parameter) the value is the key as spelled, spaces and all."""
    if len(values) != 1:
        raise InvalidKey("send exactly one Idempotency-Key header")
    try:
        text = values[0].decode("ascii")
        text = text.strip(" \t") if http_header else text
    except UnicodeDecodeError:
        raise InvalidKey("the key must be printable ASCII") from None
    if not text.startswith('"'):
        if http_header and "," in text:
            raise InvalidKey(_SEVERAL)
        key = text
    elif plain := _PLAIN_SF_STRING.fullmatch(text):
        key = plain.group(1)
    else:
        key = _unquote(text, joined=http_header)
    if not key:
        raise InvalidKey("the key is empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(f"the key is longer than {MAX_KEY_LENGTH} characters")
    if not _PRINTABLE.fullmatch(key):
        raise InvalidKey("the key must be printable ASCII")
    return key

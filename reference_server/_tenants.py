"""The tenant: the bearer token of ``Authorization``, or the anonymous tenant ``""``.

Keys, stored responses and charges all belong to a tenant, so two tenants that happen to pick
the same key make two operations and never see each other's answers (P8).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["ANONYMOUS", "InvalidAuthorization", "tenant_of"]

ANONYMOUS = ""
_TOKEN68 = re.compile(r"[A-Za-z0-9\-._~+/]{1,255}=*")


class InvalidAuthorization(ValueError):
    """An ``Authorization`` header that is not ``Bearer <token68>``."""


def tenant_of(headers: Iterable[tuple[bytes, bytes]]) -> str:
    values = [value for name, value in headers if name == b"authorization"]
    if not values:
        return ANONYMOUS
    if len(values) > 1:
        raise InvalidAuthorization("send one Authorization header")
    scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not _TOKEN68.fullmatch(token):
        raise InvalidAuthorization("write Authorization: Bearer <token> (1-255 token characters)")
    return token

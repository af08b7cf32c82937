"""The records the service, the idempotency layer and the stores pass between them.

They are plain frozen values so a store can be swapped without the layer noticing: a store
turns rows into these and back, and nothing else knows what a row looks like.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["Charge", "KeyRecord", "KeyStats", "StoredResponse"]


@dataclass(frozen=True, slots=True)
class Charge:
    """One side effect: a row of the ledger, which never deduplicates anything."""

    id: str
    tenant: str
    amount: int
    currency: str
    customer: str | None
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        """The charge as the API shows it (the tenant is the caller's own, so it is left out)."""
        return {
            "id": self.id,
            "amount": self.amount,
            "currency": self.currency,
            "customer": self.customer,
            "created_at": self.created_at.isoformat(),
        }


@dataclass(frozen=True, slots=True)
class StoredResponse:
    """What a replay sends back: the status, the headers worth replaying, the exact body bytes.

    Stored as a JSON document (``json`` in PostgreSQL, text in SQLite) holding the body as text,
    so a replay is byte-for-byte the original; a body that is not UTF-8 is kept as base64
    instead.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def document(self) -> dict[str, Any]:
        """The stored form, ready to be written as JSON."""
        document: dict[str, Any] = {"headers": [list(pair) for pair in self.headers]}
        try:
            document["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            document["body_base64"] = base64.b64encode(self.body).decode("ascii")
        return document

    def to_document(self) -> str:
        return json.dumps(self.document(), separators=(",", ":"))

    @classmethod
    def from_document(cls, status: int, document: str | dict[str, Any]) -> StoredResponse:
        parsed: dict[str, Any] = json.loads(document) if isinstance(document, str) else document
        if "body_base64" in parsed:
            body = base64.b64decode(parsed["body_base64"])
        else:
            body = str(parsed["body"]).encode("utf-8")
        headers = tuple((str(name), str(value)) for name, value in parsed["headers"])
        return cls(status, headers, body)


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """One row of the key table, as the claim logic judges it.

    ``token`` is the fencing token of the latest claim; ``response`` is ``None`` while the key is
    in progress, and ``locked_until`` is the end of that claim's lease.
    """

    fingerprint: str
    token: int
    response: StoredResponse | None
    locked_until: datetime | None
    created_at: datetime


@dataclass(frozen=True, slots=True)
class KeyStats:
    """The key table at a glance, for the admin endpoint and the P11 (bounded storage) check."""

    rows: int
    in_progress: int
    oldest_created_at: datetime | None

"""Responses the layer produces itself, and capturing the handler's so it can be stored.

A captured response is held whole until the layer decides what to do with it (commit, then
send; or discard, on a lost fence), the way Starlette's GZip responder holds the start message.
A replay sends the stored status, body and meaningful headers, marked ``Idempotent-Replayed``;
a first response never carries that mark.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reference_server._model import StoredResponse
from reference_server._types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "REPLAYED_HEADERS",
    "CapturedResponse",
    "HandlerGaveNoResponse",
    "capture",
    "error_response",
    "json_response",
    "send_captured",
    "send_error",
    "send_stored",
]

# Headers that are part of the operation's outcome; the rest (date, server) describe the
# exchange that carried it and are made fresh on every response.
REPLAYED_HEADERS = frozenset({b"content-type", b"location"})
_REPLAY_MARK = (b"idempotent-replayed", b"true")


class HandlerGaveNoResponse(RuntimeError):
    """The wrapped application returned without starting a response."""


@dataclass(frozen=True, slots=True)
class CapturedResponse:
    status: int
    headers: Sequence[tuple[bytes, bytes]]
    body: bytes

    def stored(self) -> StoredResponse:
        kept = [(name, value) for name, value in self.headers
                if name.lower() in REPLAYED_HEADERS]
        return StoredResponse(
            self.status,
            tuple((name.decode("latin-1"), value.decode("latin-1")) for name, value in kept),
            self.body,
        )


async def capture(app: ASGIApp, scope: Scope, receive: Receive) -> CapturedResponse:
    """Run ``app`` and return its whole response instead of sending it."""
    start: Message | None = None
    chunks: list[bytes] = []

    async def keep(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start":
            start = message
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, keep)
    if start is None:
        raise HandlerGaveNoResponse("the handler returned without a response")
    return CapturedResponse(int(start["status"]), list(start.get("headers", [])),
                            b"".join(chunks))


async def _send(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_captured(send: Send, response: CapturedResponse) -> None:
    await _send(send, response.status, list(response.headers), response.body)


async def send_stored(send: Send, stored: StoredResponse) -> None:
    headers = [(name.encode("latin-1"), value.encode("latin-1"))
               for name, value in stored.headers]
    headers += [(b"content-length", str(len(stored.body)).encode()), _REPLAY_MARK]
    await _send(send, stored.status, headers, stored.body)


def json_response(
    status: int, document: dict[str, Any], *, retry_after: int | None = None
) -> CapturedResponse:
    """A JSON response the layer makes itself, in the same compact form as the handler's."""
    body = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    return CapturedResponse(status, tuple(headers), body)  # immutable: the layer shares some


def error_response(
    status: int, error: str, detail: str | None = None, *, retry_after: int | None = None
) -> CapturedResponse:
    """The layer's own error answers: ``{"error": CODE}`` plus a ``detail`` when it helps."""
    document: dict[str, Any] = {"error": error}
    if detail is not None:
        document["detail"] = detail
    return json_response(status, document, retry_after=retry_after)


async def send_error(
    send: Send, status: int, error: str, detail: str | None = None, *,
    retry_after: int | None = None,
) -> None:
    await send_captured(send, error_response(status, error, detail, retry_after=retry_after))

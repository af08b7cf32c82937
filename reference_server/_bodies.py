"""Reading a request body once, within a limit, and handing it on to the handler.

The layer needs the whole body before the handler runs (to fingerprint it), so it reads it,
refuses more than ``MAX_BODY`` bytes without buffering them, and gives the handler a ``receive``
that yields the same bytes and then whatever the client does next (a disconnect).
"""

from __future__ import annotations

from reference_server._types import Message, Receive, Scope

__all__ = ["MAX_BODY", "BodyTooLarge", "ClientGone", "read_body", "replaying"]

MAX_BODY = 1 << 20


class BodyTooLarge(Exception):
    """More than ``MAX_BODY`` bytes."""


class ClientGone(Exception):
    """The client disconnected before sending its whole body."""


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def read_body(scope: Scope, receive: Receive, *, limit: int = MAX_BODY) -> bytes:
    declared = _declared_length(scope)
    if declared is not None and declared > limit:
        raise BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def replaying(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` giving ``body`` once, then deferring to the real one."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay

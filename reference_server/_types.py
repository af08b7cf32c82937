"""ASGI types, named once (the server uses Starlette's, so they mean the same thing there)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send"]

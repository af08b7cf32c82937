"""The consumer's admin HTTP port: the reference server's admin routes, plus the event feed.

The routes are the HTTP server's own (``reference_server._admin``) under ``/_admin``: health,
effects per key and in total, the key table, cleanup, and the test clock with ``--test-clock``.
So the harness's HTTP oracle and clock hook work on a consumer unchanged.  ``/_admin/events``
is the consumer's own: what it did, in order (``_events``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route, Router

from harness.services._network import is_loopback
from reference_server._admin import admin_app
from reference_server._cleanup import CleanupJob
from reference_server._clock import ServerClock
from reference_server.consumer._events import EventLog
from reference_server.stores import Store

__all__ = ["MAX_EVENT_WAIT", "consumer_admin_app"]

MAX_EVENT_WAIT = 30.0


def _error(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"error": "invalid_request", "detail": detail}, status)


def consumer_admin_app(
    *, store: Store, clock: ServerClock, cleanup: CleanupJob, events: EventLog,
    health: Callable[[], dict[str, Any]],
) -> Router:
    async def events_endpoint(request: Request) -> Response:
        if not (request.client and is_loopback(request.client.host)):
            return JSONResponse({"error": "forbidden"}, 403)
        try:
            after = int(request.query_params.get("after", "0"))
            wait = float(request.query_params.get("wait", "0"))
        except ValueError:
            return _error(400, "after is an event number (0 for all), wait a number of seconds")
        if after < 0 or not math.isfinite(wait) or not 0 <= wait <= MAX_EVENT_WAIT:
            return _error(400, f"after must be >= 0 and wait from 0 to {MAX_EVENT_WAIT:g}")
        found = await events.wait_since(after, wait) if wait else events.since(after)
        cursor = found[-1]["index"] + 1 if found else min(after, events.next_index)
        return JSONResponse({"events": found, "next": cursor})

    admin = admin_app(store=store, clock=clock, cleanup=cleanup, health=health)
    return Router(routes=[
        Route("/_admin/events", events_endpoint, methods=["GET"]),
        Mount("/_admin", app=admin),
    ])

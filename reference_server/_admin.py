"""The admin side door under ``/_admin/``, for the harness's oracle and its clock faults.

It answers only loopback clients (403 otherwise).  The effects endpoints count ledger rows by
the key the client sent, so the oracle sees duplicates whatever the idempotency layer did with
the key; the clock endpoints exist only with ``--test-clock``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, Router

from harness.services._network import is_loopback
from reference_server._cleanup import CleanupJob
from reference_server._clock import ServerClock
from reference_server._keys import InvalidKey, parse_key
from reference_server._responses import send_error
from reference_server._types import ASGIApp, Receive, Scope, Send
from reference_server.stores import Store, StoreUnavailable

__all__ = ["MAX_CLOCK_ADVANCE", "admin_app"]

MAX_CLOCK_ADVANCE = 10 * 366 * 86400.0
Endpoint = Callable[[Request], Awaitable[Response]]


class _LoopbackOnly:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] == "http" and not (client and is_loopback(client[0])):
            await send_error(send, 403, "forbidden", "the admin endpoints answer loopback only")
            return
        await self.app(scope, receive, send)


def _error(status: int, error: str, detail: str | None = None) -> JSONResponse:
    document = {"error": error} if detail is None else {"error": error, "detail": detail}
    return JSONResponse(document, status)


def _guarded(endpoint: Endpoint) -> Endpoint:
    """A store outage is a 503 here too, never a traceback."""

    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except StoreUnavailable:
            return JSONResponse({"error": "store_unavailable"}, 503, headers={"Retry-After": "1"})

    return guarded


def admin_app(
    *, store: Store, clock: ServerClock, cleanup: CleanupJob,
    health: Callable[[], dict[str, Any]],
) -> ASGIApp:
    async def health_endpoint(request: Request) -> Response:
        return JSONResponse(health())

    async def effects(request: Request) -> Response:
        tenant = request.query_params.get("tenant", "")
        raw_key = request.query_params.get("key")
        try:
            key = (None if raw_key is None
                   else parse_key([raw_key.encode("utf-8")], http_header=False))
        except InvalidKey as exc:
            return _error(400, "idempotency_key_invalid", str(exc))
        charge_ids = await store.effects(tenant, key)
        return JSONResponse(
            {"tenant": tenant, "key": raw_key, "count": len(charge_ids), "charge_ids": charge_ids}
        )

    async def effects_total(request: Request) -> Response:
        return JSONResponse({"total": await store.effects_total()})

    async def keys(request: Request) -> Response:
        stats = await store.key_stats()
        oldest = stats.oldest_created_at
        return JSONResponse({
            "rows": stats.rows,
            "in_progress": stats.in_progress,
            "oldest_created_at": None if oldest is None else oldest.isoformat(),
        })

    async def run_cleanup(request: Request) -> Response:
        return JSONResponse({"deleted": await cleanup.run_once()})

    async def read_clock(request: Request) -> Response:
        return JSONResponse({"now": (await clock.now()).isoformat()})

    async def advance_clock(request: Request) -> Response:
        try:
            seconds = (await request.json())["seconds"]
        except (ValueError, KeyError, TypeError):
            return _error(400, "invalid_request", 'send {"seconds": NUMBER}')
        if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                or not math.isfinite(seconds) or not 0 <= seconds <= MAX_CLOCK_ADVANCE):
            return _error(400, "invalid_request",
                          f"seconds must be a number from 0 to {MAX_CLOCK_ADVANCE:.0f}")
        now = await clock.advance(float(seconds))
        with contextlib.suppress(StoreUnavailable):  # else the next pass cleans up
            await cleanup.run_once()  # expiry is due now, not at the next interval
        return JSONResponse({"now": now.isoformat()})

    routes = [
        Route("/health", health_endpoint, methods=["GET"]),
        Route("/effects", _guarded(effects), methods=["GET"]),
        Route("/effects/total", _guarded(effects_total), methods=["GET"]),
        Route("/keys", _guarded(keys), methods=["GET"]),
        Route("/cleanup", _guarded(run_cleanup), methods=["POST"]),
    ]
    if clock.adjustable:
        routes += [
            Route("/clock", _guarded(read_clock), methods=["GET"]),
            Route("/clock/advance", _guarded(advance_clock), methods=["POST"]),
        ]

    async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
        await send_error(send, 404, "not_found")

    return _LoopbackOnly(Router(routes=routes, redirect_slashes=False, default=not_found))

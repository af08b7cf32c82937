"""Assembling the server: store, clock, cleanup job, service, idempotency layer and admin door.

    Router
     ├── /_admin/...  loopback only: health, effects, keys, cleanup, test clock
     └── everything else
          └── IdempotencyMiddleware        (the outermost boundary of the service)
               └── HandlerFaults            (only with --test-faults)
                    └── ChargeService.app   (POST /charges, GET /charges/{id})

The store opens in the lifespan, so a server whose database is unreachable fails to start
instead of answering 503 to its readiness check.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.routing import Mount, Router

from reference_server._admin import admin_app
from reference_server._behaviour import CORRECT
from reference_server._charges import ChargeService
from reference_server._cleanup import CleanupJob
from reference_server._clock import ServerClock
from reference_server._faults import HandlerFaults
from reference_server._middleware import IdempotencyMiddleware
from reference_server._settings import ServerSettings
from reference_server._types import ASGIApp
from reference_server.flaws import flaws_named, with_flaws
from reference_server.stores import store_from_url

__all__ = ["create_app"]


def create_app(settings: ServerSettings) -> Router:
    """The whole server as an ASGI app; raises ``StoreUrlError`` or ``UnknownFlaw`` early."""
    behaviour = with_flaws(CORRECT, flaws_named(settings.flaws))
    store = store_from_url(settings.store_url)
    clock = ServerClock(store, adjustable=settings.test_clock)
    cleanup = CleanupJob(
        store, clock,
        retention=behaviour.retention(settings.retention),
        interval=settings.cleanup_interval,
        enabled=behaviour.cleanup,
    )
    service: ASGIApp = ChargeService(store, clock, work_delay=settings.work_delay).app
    if settings.test_faults:
        service = HandlerFaults(service)
    layer: IdempotencyMiddleware | None = None
    if settings.idempotency:
        service = layer = IdempotencyMiddleware(
            service, store,
            clock=clock,
            mode=settings.mode,
            retention=settings.retention,
            lease=settings.lease,
            in_progress=settings.in_progress,
            wait_timeout=settings.wait_timeout,
            max_waiters=settings.max_waiters,
            errors=settings.errors,
            test_faults=settings.test_faults,
            behaviour=behaviour,
            # Without the simulated provider latency, a charge is a row in the store and nothing
            # else: it can be written with its key in one transaction.
            local_work=not settings.work_delay,
        )

    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "pid": os.getpid(),
            "store": store.kind,
            "flaw": " + ".join(settings.flaws) or None,
            "mode": settings.mode,
            "in_progress": settings.in_progress,
            "errors": settings.errors,
            "lease": settings.lease,
            "retention": settings.retention,
            "test_clock": settings.test_clock,
            "test_faults": settings.test_faults,
            "idempotency": settings.idempotency,
            "waiters": 0 if layer is None else layer.waiting_room.occupied,
        }

    @asynccontextmanager
    async def lifespan(app: Router) -> AsyncIterator[None]:
        await store.open()
        cleanup.start()
        try:
            yield
        finally:
            await cleanup.stop()
            await store.close()

    admin = admin_app(store=store, clock=clock, cleanup=cleanup, health=health)
    return Router(
        routes=[Mount("/_admin", app=admin), Mount("", app=service)],
        lifespan=lifespan,
    )

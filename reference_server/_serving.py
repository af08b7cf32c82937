"""Running the app under uvicorn: logs, read deadlines, and a quick, clean shutdown.

Logs on stderr, read deadlines for slow clients, and a quick, clean shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Iterator

import uvicorn

from reference_server._deadlines import with_read_deadlines
from reference_server._settings import ServerSettings
from reference_server.app import create_app
from reference_server.stores import StoreUnavailable, store_from_url, store_kind

__all__ = ["STARTUP_FAILED", "run_server"]

STARTUP_FAILED = 3  # uvicorn's own exit code for a lifespan that failed


def _unreachable(store_url: str) -> str | None:
    """Why the store cannot be opened (the driver's own reason), or None.  Tried before uvicorn
    starts, because a store that fails inside the lifespan is reported as a traceback."""
    if store_kind(store_url) != "postgresql":
        return None  # a SQLite path was checked with the URL; opening creates the file
    store = store_from_url(store_url)

    async def probe() -> None:
        try:
            await store.open()
        finally:
            await store.close()

    try:
        asyncio.run(probe())
    except StoreUnavailable as exc:
        return str(exc)
    return None


class _Server(uvicorn.Server):
    """uvicorn raises the signal it shut down on again once it is done, so the process dies of
    it (143, or click's "Aborted!" and 1 under ``idem-harness serve``); here a shutdown asked
    for by SIGINT or SIGTERM that went cleanly is a success, exit 0."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            try:
                yield
            finally:
                self._captured_signals.clear()


def run_server(settings: ServerSettings) -> None:
    """Serve until SIGINT or SIGTERM (then exit 0); exit with ``STARTUP_FAILED`` if the store
    cannot open."""
    app = create_app(settings)
    problem = _unreachable(settings.store_url)
    if problem is not None:
        print(f"error: the store cannot be opened: {problem}\n(check --store, and that the "
              "database server is running and accepts this user)", file=sys.stderr)
        raise SystemExit(STARTUP_FAILED)
    logging.basicConfig(
        level=settings.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        log_level=settings.log_level,
        access_log=settings.log_level == "debug",
        lifespan="on",
        timeout_graceful_shutdown=2,
        http=with_read_deadlines(settings.header_timeout, settings.body_timeout),
    )
    server = _Server(config)
    server.run()
    if not server.started:
        raise SystemExit(STARTUP_FAILED)

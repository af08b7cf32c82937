"""Running the app under uvicorn: logs, read deadlines, and a quick, clean shutdown.

Logs on stderr, read deadlines for slow clients, and a quick, clean shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import sys
from collections.abc import Iterator

import uvicorn

from reference_server._deadlines import with_read_deadlines
from reference_server._settings import ServerSettings
from reference_server.app import create_app
from reference_server.stores import StoreUnavailable, store_from_url, store_kind

__all__ = ["STARTUP_FAILED", "USAGE", "run_server"]

STARTUP_FAILED = 3  # uvicorn's own exit code for a lifespan that failed
USAGE = 2  # click's exit code for a usage error: an option that cannot be honoured


def _bound(host: str, port: int) -> socket.socket:
    """The listening socket, bound here rather than by uvicorn: a port already in use is the
    caller's choice to fix (exit 2, naming it), not a failed start (uvicorn logs the error and
    exits 1, which became 3 here).  uvicorn then serves on this very socket, so nothing can
    take the port in between."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            print(f"error: port {port} is in use on {host}: another process listens there\n"
                  "  fix: stop it, or choose another --port", file=sys.stderr)
        else:
            print(f"error: cannot listen on {host}:{port}: {exc.strerror or exc}\n"
                  "  fix: choose another --host or --port", file=sys.stderr)
        raise SystemExit(USAGE) from None
    sock.set_inheritable(True)
    return sock


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
    cannot open, with ``USAGE`` if the port cannot be listened on."""
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
    server.run(sockets=[_bound(settings.host, settings.port)])
    if not server.started:
        raise SystemExit(STARTUP_FAILED)

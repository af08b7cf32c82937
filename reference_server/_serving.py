"""Running the app under uvicorn, with logs on stderr and a quick, clean shutdown."""

from __future__ import annotations

import logging
import sys

import uvicorn

from reference_server._settings import ServerSettings
from reference_server.app import create_app

__all__ = ["STARTUP_FAILED", "run_server"]

STARTUP_FAILED = 3  # uvicorn's own exit code for a lifespan that failed


def run_server(settings: ServerSettings) -> None:
    """Serve until SIGINT or SIGTERM; exit with ``STARTUP_FAILED`` if the store cannot open."""
    app = create_app(settings)
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
    )
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        raise SystemExit(STARTUP_FAILED)

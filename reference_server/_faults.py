"""Deterministic faults a test can ask for, per request, when the server runs with --test-faults.

``X-Test-Fault`` names one point: the process dies (``os._exit(137)``, no cleanup, no flush of
anything but the log) right after the claim committed, right after the work was done but before
its commit, or right after the commit but before the response is sent; or the charge handler
raises.  ``X-Test-Delay-Ms`` makes this request's handler that much slower, to outlive a lease.
Without --test-faults neither header is read.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import sys
from dataclasses import dataclass
from typing import NoReturn

from reference_server._responses import send_error
from reference_server._types import ASGIApp, Receive, Scope, Send

__all__ = [
    "CRASH_EXIT_CODE",
    "MAX_TEST_DELAY_MS",
    "FaultPoint",
    "FaultRequest",
    "HandlerFaults",
    "InjectedHandlerError",
    "InvalidTestHeaders",
    "crash",
    "requested_faults",
]

logger = logging.getLogger(__name__)

CRASH_EXIT_CODE = 137
MAX_TEST_DELAY_MS = 600_000
_FAULT_HEADER = b"x-test-fault"
_DELAY_HEADER = b"x-test-delay-ms"


class FaultPoint(enum.StrEnum):
    CRASH_AFTER_CLAIM = "crash-after-claim"
    CRASH_AFTER_WORK = "crash-after-work"
    CRASH_BEFORE_RESPONSE = "crash-before-response"
    HANDLER_ERROR = "handler-error"


class InvalidTestHeaders(ValueError):
    """A test header with a value the server does not know."""


class InjectedHandlerError(RuntimeError):
    """The handler failure a test asked for with ``X-Test-Fault: handler-error``."""


@dataclass(frozen=True, slots=True)
class FaultRequest:
    """The faults one request asked for."""

    fault: FaultPoint | None = None
    delay_ms: int = 0


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1")).strip()
    return None


def requested_faults(scope: Scope) -> FaultRequest:
    """The faults named by the request's test headers; ``InvalidTestHeaders`` if unknown."""
    fault_name = _header(scope, _FAULT_HEADER)
    delay_text = _header(scope, _DELAY_HEADER)
    try:
        fault = None if fault_name is None else FaultPoint(fault_name)
    except ValueError:
        choices = ", ".join(point.value for point in FaultPoint)
        raise InvalidTestHeaders(f"X-Test-Fault must be one of {choices}") from None
    if delay_text is None:
        return FaultRequest(fault)
    if not delay_text.isdigit() or int(delay_text) > MAX_TEST_DELAY_MS:
        raise InvalidTestHeaders(f"X-Test-Delay-Ms must be an integer from 0 to "
                                 f"{MAX_TEST_DELAY_MS}")
    return FaultRequest(fault, int(delay_text))


def crash(point: FaultPoint) -> NoReturn:
    """Die now, as a SIGKILL would leave things (exit code 137)."""
    logger.warning("X-Test-Fault: %s: exiting with %d", point.value, CRASH_EXIT_CODE)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stderr.flush()
    os._exit(CRASH_EXIT_CODE)


class HandlerFaults:
    """Wraps the handler: adds the requested delay, and raises when asked to."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            request = requested_faults(scope)
        except InvalidTestHeaders as exc:
            await send_error(send, 400, "invalid_test_headers", str(exc))
            return
        if request.delay_ms:
            await asyncio.sleep(request.delay_ms / 1000)
        if request.fault is FaultPoint.HANDLER_ERROR:
            raise InjectedHandlerError("X-Test-Fault: handler-error")
        await self.app(scope, receive, send)

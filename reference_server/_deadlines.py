"""Read deadlines for slow clients: a request's headers, then its body, must arrive in time.

uvicorn waits for a request as long as its client keeps the connection open: a client that
sends a header line now and then (slowloris), or a body slower than a trickle, holds a
connection and its buffers for good.  This protocol gives the headers ``header_timeout``
seconds from the connection (or, on a kept-alive connection, from the request's first byte) and
the body ``body_timeout`` seconds from its headers; past either it answers 408 and closes.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["DEFAULT_BODY_TIMEOUT", "DEFAULT_HEADER_TIMEOUT", "with_read_deadlines"]

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0


def _answer_408(what: str, seconds: float) -> bytes:
    body = (f'{{"error":"request_timeout","detail":"the request\'s {what} did not arrive '
            f'within {seconds:g} s"}}').encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))


def with_read_deadlines(header_timeout: float, body_timeout: float) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol with these deadlines (``uvicorn.Config(http=...)``)."""

    class ReadDeadlines(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _waiting_for: str = ""

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm("headers", header_timeout)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.IDLE and not self.transport.is_closing():
                if self._waiting_for != "headers":  # the next request's first bytes
                    self._arm("headers", header_timeout)
            elif state is h11.SEND_BODY:
                if self._waiting_for != "body":
                    self._arm("body", body_timeout)
            else:  # the whole request is in
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self, what: str, seconds: float) -> None:
            self._disarm()
            self._waiting_for = what
            self._deadline = self.loop.call_later(seconds, self._too_slow, what, seconds)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline, self._waiting_for = None, ""

        def _too_slow(self, what: str, seconds: float) -> None:
            self._deadline = None
            if self.transport.is_closing():
                return
            self.logger.warning("closing a connection whose request %s did not arrive within "
                                "%g s", what, seconds)
            cycle: Any = self.cycle
            if what == "body" and cycle is not None:
                if cycle.response_started:  # the handler answered already: only close
                    self.transport.close()
                    return
                cycle.disconnected = True  # the handler reads a disconnect; its answer is lost
                cycle.message_event.set()
            self.transport.write(_answer_408(what, seconds))
            self.transport.close()

    return ReadDeadlines

"""The load's HTTP sender: kept-alive connections on gevent sockets, under the recording client.

The engine's ``RecordingClient`` sends through httpx and opens a fresh connection for every
attempt, so that a fault aimed at one request never rides a kept-alive connection into the
next.  Under load that is most of a Locust process's CPU (building the httpx request alone takes
about 0.2 ms; then a connect, a name lookup through gevent's thread pool and a close per attempt,
in httpcore), and it doubles the work of Toxiproxy and the servers, where a real client, and
Locust's own ``FastHttpUser``, keeps its connections.  The load's faults are not aimed at one
request: a window acts on every connection of a proxy, old and new alike, at full toxicity.  So
the load keeps its connections, with the care that keeps the history honest:

- a connection is reused only while it sits idle and unread (one the server or a crash closed,
  or that holds stray bytes, is readable: it is closed and a new one made);
- a connection that met any error (a timeout, a reset, a close, a parse error) is closed, never
  reused, so a retry goes out on a fresh one;
- the errors are httpx's, so ``RecordingClient`` classifies them exactly as for every other
  front end (no connection: ``fail``; a timeout or a reset after the request left: ``info``),
  and nothing is ever resent behind its back.

``KeptAliveHttp`` takes the place of the recording client's ``httpx.Client`` and answers its one
call, ``request(method, url, content=, headers=, timeout=)``, without httpx's request machinery
(cookies, auth, redirects: the harness uses none); responses are parsed by geventhttpclient's
parser (llhttp, in C: the one ``FastHttpUser`` uses) and handed back as ``httpx.Response``.
Runs in a Locust process, where gevent has patched ``socket`` and ``select``.
"""

from __future__ import annotations

import socket
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError, HTTPSocketResponse

from harness._history import History
from harness._target import Target
from harness.http._client import RecordingClient

__all__ = ["KeptAliveClient", "KeptAliveHttp"]

_Origin = tuple[str, int]
#: Sent with every request, as httpx sends its defaults; the body comes back as it is stored.
_DEFAULT_HEADERS = (b"Accept: */*\r\nAccept-Encoding: gzip, deflate\r\n"
                    b"Connection: keep-alive\r\nUser-Agent: idem-harness-load\r\n")
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class KeptAliveHttp(httpx.Client):
    """Plain-HTTP/1.1 connections per origin, reused while they stay clean."""

    def __init__(self, *, timeout: float) -> None:
        super().__init__(timeout=timeout)
        self._idle: dict[_Origin, list[socket.socket]] = {}
        self._origins: dict[str, tuple[_Origin, str, bytes]] = {}
        self._addresses: dict[_Origin, tuple[int, tuple[str, int]]] = {}

    def request(self, method: str, url: httpx.URL | str, *, content: Any = None,
                headers: Any = None, timeout: Any = httpx.USE_CLIENT_DEFAULT,
                **unsupported: Any) -> httpx.Response:
        if unsupported or not isinstance(url, str) or not isinstance(content, bytes | None):
            raise TypeError("KeptAliveHttp sends a string URL and bytes only, as "
                            "RecordingClient does")
        seconds = self.timeout.read if timeout is httpx.USE_CLIENT_DEFAULT else timeout
        origin, target, host = self._split(url)
        body = content or b""
        lines = [f"{method} {target} HTTP/1.1\r\n".encode("ascii"), host, _DEFAULT_HEADERS,
                 b"Content-Length: %d\r\n" % len(body)]
        if headers:
            lines += [f"{name}: {value}\r\n".encode("latin-1")
                      for name, value in _items(headers)]
        lines += [b"\r\n", body]
        connection = self._idle_connection(origin) or self._connect(origin, seconds)
        with _closing_on_error(connection):
            connection.settimeout(seconds)
            connection.sendall(b"".join(lines))
            response = HTTPSocketResponse(connection, method=method)
            data = response.read()
            if not response.message_complete:
                raise HTTPConnectionClosed("connection closed before the end of the body")
            coding = response.get("content-encoding")
            if isinstance(coding, str) and coding.lower() in _DECODERS:
                data = zlib.decompress(data, _DECODERS[coding.lower()])
        if response.should_close():
            connection.close()
        else:
            self._idle.setdefault(origin, []).append(connection)
        answer = httpx.Response(response.status_code, headers=list(response.items()),
                                stream=httpx.ByteStream(data))
        answer.read()
        return answer

    def close(self) -> None:
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()
        super().close()

    def _split(self, url: str) -> tuple[_Origin, str, bytes]:
        """The origin, the request target and the Host line of ``url`` (read once per URL)."""
        known = self._origins.get(url)
        if known is None:
            parts = urlsplit(url)
            if parts.scheme != "http" or not parts.hostname:
                raise httpx.UnsupportedProtocol(f"the load sends plain http, not {url!r}")
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            origin = (parts.hostname, parts.port or 80)
            known = (origin, target, f"Host: {parts.netloc}\r\n".encode("ascii"))
            if len(self._origins) < 4096:  # charges go to a few URLs; guard anything else
                self._origins[url] = known
        return known

    def _idle_connection(self, origin: _Origin) -> socket.socket | None:
        """The most recently used idle connection that is still clean, if any."""
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            connection.settimeout(0.0)  # a peek that never waits (nor enters gevent's hub)
            try:
                connection.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                return connection  # nothing to read: clean and open
            except OSError:
                pass
            connection.close()  # closed by the peer, or holding bytes nobody asked for
        return None

    def _connect(self, origin: _Origin, seconds: float | None) -> socket.socket:
        connection = None
        try:
            family, address = self._address(origin)
            connection = socket.socket(family, socket.SOCK_STREAM)
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection.settimeout(seconds)
            connection.connect(address)
        except TimeoutError as exc:
            if connection is not None:
                connection.close()
            raise httpx.ConnectTimeout(str(exc) or "connect timed out") from exc
        except OSError as exc:
            if connection is not None:
                connection.close()
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return connection

    def _address(self, origin: _Origin) -> tuple[int, tuple[str, int]]:
        """The origin's socket address, looked up once (an IP address needs no lookup)."""
        known = self._addresses.get(origin)
        if known is None:
            family, _, _, _, address = socket.getaddrinfo(*origin, type=socket.SOCK_STREAM)[0]
            known = self._addresses[origin] = (family, (str(address[0]), int(address[1])))
        return known


def _items(headers: Any) -> Iterator[tuple[str, str]]:
    if isinstance(headers, Mapping):
        yield from headers.items()
    else:
        yield from headers


@contextmanager
def _closing_on_error(connection: socket.socket) -> Iterator[None]:
    """httpx's error for whatever breaks once the connection is made; the connection is closed,
    never reused."""
    try:
        yield
    except TimeoutError as exc:
        connection.close()
        raise httpx.ReadTimeout(str(exc) or "timed out") from exc
    except HTTPConnectionClosed as exc:
        connection.close()
        raise httpx.RemoteProtocolError("server disconnected without sending a complete "
                                        "response") from exc
    except HTTPParseError as exc:
        connection.close()
        raise httpx.RemoteProtocolError(f"unreadable response: {exc}") from exc
    except (OSError, zlib.error) as exc:
        connection.close()
        raise httpx.ReadError(str(exc) or type(exc).__name__) from exc


class KeptAliveClient(RecordingClient):
    """The engine's recording client, sending through ``KeptAliveHttp``: the same events, the
    same classification of errors, other connections."""

    def __init__(self, target: Target, history: History, urls: list[str]) -> None:
        super().__init__(target, history, urls,
                         http=KeptAliveHttp(timeout=target.client.timeout))

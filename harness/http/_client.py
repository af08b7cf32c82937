"""The recording client: every HTTP attempt becomes an invoke and a completion in the history.

Errors are classified at this boundary, once, Jepsen's way: no connection means the request
never left (``fail``); a timeout or a reset after it left means nobody knows whether the charge
committed (``info``); any HTTP answer completes the attempt (``ok`` for 2xx, ``fail`` otherwise).
Every attempt uses a fresh connection, so a fault aimed at one request never rides a kept-alive
connection into the next.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Protocol
from urllib.parse import urlsplit

import h11
import httpx
import rfc8785

from harness._history import Event, EventType, History
from harness._target import Endpoint, ErrorPolicy, Target, encode_key
from harness.judging._analysis import is_final

__all__ = [
    "Client",
    "RecordingClient",
    "Request",
    "RetryPolicy",
    "body_digest",
    "fingerprint",
]

_MEANINGFUL_HEADERS = ("content-type", "location", "retry-after", "idempotent-replayed")
_BODY_KEPT = 2000


@dataclass(frozen=True, slots=True)
class Request:
    """One attempt as a generator asks for it.

    ``body`` is JSON data, serialised in its own key order; ``raw_body`` sends exact bytes instead
    (other whitespace, or something that is not JSON).  ``key_header`` sends a header value
    verbatim, for hostile keys the target must refuse.
    """

    key: str | None
    tenant: str | None
    body: Any = None
    raw_body: bytes | None = None
    method: str | None = None
    path: str | None = None
    key_header: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    label: str = ""


class Client(Protocol):
    def send(self, request: Request, *, process: str, attempt: int = 1,
             timeout: float | None = None, instance: int = 0) -> Event:
        """Send one attempt and return its completion event."""
        ...


def _read_answer(reader: h11.Connection,
                 connection: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Read one answer from ``connection`` through ``reader``: its status, headers and whole
    body; ``h11.RemoteProtocolError`` when the connection ends before the answer does."""
    status, headers, body = 0, {}, bytearray()
    while True:
        event = reader.next_event()
        if event is h11.NEED_DATA:
            reader.receive_data(connection.recv(65536))  # b"": the connection ended
        elif isinstance(event, h11.InformationalResponse):
            continue
        elif isinstance(event, h11.Response):
            status = event.status_code
            headers = {name.decode("latin-1"): value.decode("latin-1")
                       for name, value in event.headers}
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            return status, headers, bytes(body)


def _printable(value: str) -> bool:
    """Visible ASCII with spaces inside it: what an HTTP client library agrees to put in a
    header (h11 refuses a value that starts or ends with whitespace)."""
    return value == value.strip(" \t") and all(" " <= character <= "~" or character == "\t"
                                                for character in value)


def _canonical(raw: bytes) -> bytes:
    """RFC 8785 canonical JSON of ``raw``, or ``raw`` itself when it is not JSON."""
    try:
        return rfc8785.dumps(json.loads(raw))
    except (ValueError, TypeError, RecursionError, rfc8785.CanonicalizationError):
        return raw  # not JSON, or too deeply nested to parse: compare the bytes


def fingerprint(method: str, path: str, raw_body: bytes) -> str:
    """What makes two requests "the same request": method, path and canonical JSON body."""
    digest = hashlib.sha256(f"{method.upper()} {path}\n".encode() + _canonical(raw_body))
    return digest.hexdigest()[:16]


def body_digest(raw: bytes) -> str:
    """Digest of a response body that ignores JSON key order and whitespace (jsonb reorders)."""
    return hashlib.sha256(_canonical(raw)).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a well-behaved client retries one operation: same key, backoff, a bounded budget."""

    max_attempts: int = 10
    base_delay: float = 0.05
    max_delay: float = 0.5
    deadline: float = 20.0

    def covering(self, seconds: float) -> RetryPolicy:
        """This policy stretched to keep retrying for at least ``seconds`` (a promised lease the
        client must outwait), with backoff up to a few seconds and a few attempts to spare."""
        if seconds <= 0:
            return self
        max_delay = max(self.max_delay, min(5.0, seconds / 20))
        attempts = self.max_attempts + math.ceil(seconds / (max_delay / 2)) + 3
        return replace(self, deadline=max(self.deadline, seconds), max_delay=max_delay,
                       max_attempts=attempts)

    def delay(self, attempt: int, retry_after: str | None, rng: random.Random) -> float:
        backoff: float = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        if retry_after is not None and retry_after.replace(".", "", 1).isdigit():
            backoff = min(self.max_delay, max(backoff, float(retry_after)))
        return backoff * (0.5 + rng.random() / 2)


@cache
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for every recording client of the process: building one
    loads the CA bundle (tens of milliseconds), and the explorer makes a client per example."""
    return httpx.create_ssl_context()


class RecordingClient:
    """Sends the target's endpoint requests through its proxies and records every attempt."""

    def __init__(self, target: Target, history: History, urls: list[str], *,
                 http: httpx.Client | None = None) -> None:
        """``http`` sends the requests; by default a new connection for each, so a request
        never rides on a connection a fault left half-broken."""
        self.target = target
        self.history = history
        self.urls = urls
        self._http = http or httpx.Client(
            timeout=target.client.timeout, verify=_tls_context(),
            limits=httpx.Limits(max_keepalive_connections=0, max_connections=None),
        )

    def close(self) -> None:
        self._http.close()

    def operation(self, method: str, path: str) -> Endpoint:
        """The declared operation ``method path`` belongs to; the primary one for anything
        else, such as a hostile request."""
        return self.target.operation_for(method, path) or self.target.endpoint

    def prepare(self, request: Request) -> tuple[str, str, bytes, dict[str, str]]:
        """Method, path, body bytes and headers exactly as they will be sent; the headers a
        declared operation asks for come from that operation."""
        primary = self.target.endpoint
        method = (request.method or primary.method).upper()
        path = request.path or primary.path
        endpoint = self.operation(method, path)
        if request.raw_body is not None:
            raw = request.raw_body
        else:
            raw = json.dumps(request.body, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json", **endpoint.headers, **request.headers}
        if request.key_header is not None:
            headers[self.target.key.header] = request.key_header
        elif request.key is not None:
            headers[self.target.key.header] = encode_key(request.key, self.target.key.syntax)
        if request.tenant is not None and self.target.tenant is not None:
            tenant = self.target.tenant
            headers[tenant.header] = tenant.format.replace("{tenant}", request.tenant)
        return method, path, raw, headers

    def _unexplained(self, headers: Mapping[str, str]) -> dict[str, str]:
        """The headers a request sent beyond the usual JSON body type, its key and its tenant
        (which the event records in fields of their own)."""
        own = {self.target.key.header.lower()}
        if self.target.tenant is not None:
            own.add(self.target.tenant.header.lower())
        return {k: v for k, v in headers.items() if k.lower() not in own
                and (k.lower(), v) != ("content-type", "application/json")}

    def send(self, request: Request, *, process: str, attempt: int = 1,
             timeout: float | None = None, instance: int = 0) -> Event:
        method, path, raw, headers = self.prepare(request)
        invocation = self.history.invoke(
            "request", process,
            key=request.key, tenant=request.tenant, attempt=attempt, label=request.label or None,
            method=method, path=path, fingerprint=fingerprint(method, path, raw),
            body=raw.decode(errors="replace")[:_BODY_KEPT],
            key_header=headers.get(self.target.key.header),
            # Headers the key, the tenant and the body type do not explain (an operation's
            # own, a fault hook's): a reproduction must send them too.
            headers=self._unexplained(headers) or None,
            value={"instance": instance} if instance else {},
        )
        url = self.urls[instance % len(self.urls)] + path
        if not all(_printable(v) for v in headers.values()):
            return self._send_verbatim(invocation, method, url, raw, headers, timeout)
        try:
            response = self._http.request(
                method, url, content=raw, headers=headers,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            return self.history.complete(invocation, "fail", error="connect",
                                         value={"detail": str(exc)})
        except httpx.TimeoutException as exc:
            return self.history.complete(invocation, "info", error="timeout",
                                         value={"detail": str(exc) or type(exc).__name__})
        except httpx.RemoteProtocolError as exc:
            return self.history.complete(invocation, "info", error="disconnected",
                                         value={"detail": str(exc)})
        except httpx.TransportError as exc:
            return self.history.complete(invocation, "info", error="reset",
                                         value={"detail": str(exc) or type(exc).__name__})
        return self._record_answer(invocation, response.status_code, dict(response.headers),
                                   response.content)

    def _send_verbatim(self, invocation: Event, method: str, url: str, raw: bytes,
                       headers: dict[str, str], timeout: float | None) -> Event:
        """Send header bytes that httpx (rightly) refuses to send, such as control characters
        and UTF-8 in a key, on a socket of its own: the target must see the hostile input.  The
        answer is read by h11, as httpx reads one, so that an answer cut short (a fault that
        cuts the response inside its header block, which ``http.client`` takes for a whole
        header block with no length and an empty body) is a lost answer, never a short one."""
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 80
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        framing = [("Host", f"{host}:{port}"), ("Content-Length", str(len(raw))),
                   ("Connection", "close")]
        head = b"".join(f"{name}: ".encode() + value.encode("utf-8", "surrogateescape") + b"\r\n"
                        for name, value in [*framing[:1], *headers.items(), *framing[1:]])
        reader = h11.Connection(h11.CLIENT)  # told of the request so that it reads the answer
        reader.send(h11.Request(method=method, target=target, headers=framing))
        reader.send(h11.EndOfMessage() if not raw else h11.Data(data=raw))
        if raw:
            reader.send(h11.EndOfMessage())
        wait = timeout if timeout is not None else self.target.client.timeout
        try:
            with socket.create_connection((host, port), timeout=wait) as connection:
                connection.sendall(f"{method} {target} HTTP/1.1\r\n".encode() + head + b"\r\n"
                                   + raw)
                status, answer_headers, content = _read_answer(reader, connection)
        except ConnectionRefusedError as exc:
            return self.history.complete(invocation, "fail", error="connect",
                                         value={"detail": str(exc)})
        except TimeoutError as exc:
            return self.history.complete(invocation, "info", error="timeout",
                                         value={"detail": str(exc)})
        except h11.RemoteProtocolError as exc:
            return self.history.complete(invocation, "info", error="disconnected",
                                         value={"detail": str(exc)})
        except OSError as exc:
            return self.history.complete(invocation, "info", error="reset",
                                         value={"detail": str(exc) or type(exc).__name__})
        return self._record_answer(invocation, status, answer_headers, content)

    def _record_answer(self, invocation: Event, status: int, all_headers: Mapping[str, str],
                       content: bytes) -> Event:
        kept = {*_MEANINGFUL_HEADERS}
        if self.target.promises.replay_header:
            kept.add(self.target.promises.replay_header.lower())
        headers = {k.lower(): v for k, v in all_headers.items() if k.lower() in kept}
        type_: EventType = "ok" if 200 <= status < 300 else "fail"
        return self.history.complete(
            invocation, type_,
            status=status,
            headers=headers,
            body_digest=body_digest(content),
            body=content.decode(errors="replace")[:_BODY_KEPT],
            resource=self._resource(invocation, status, content),
        )

    def _resource(self, invocation: Event, status: int, content: bytes) -> str | None:
        """The created resource's id, read from the field the request's operation names."""
        operation = self.operation(invocation.method or "", invocation.path or "")
        field_name = operation.resource_field
        if not field_name or not 200 <= status < 300:
            return None
        try:
            data = json.loads(content)
        except ValueError:
            return None
        value = data.get(field_name) if isinstance(data, dict) else None
        return None if value is None else str(value)

    def send_until_answer(
        self, request: Request, *, process: str, policy: RetryPolicy, rng: random.Random,
        first_attempt: int = 1, instance: int = 0, rotate: bool = False,
        errors: ErrorPolicy | None = None,
    ) -> list[Event]:
        """Retry with the same key until a final answer, the attempt budget or the deadline.

        With ``rotate`` each attempt goes to the next instance, so the retries of one key land
        on different server processes, where a claim that is atomic only inside one process
        gives way.  ``errors`` is the error policy of the fault that failed the key's handler.
        """
        completions: list[Event] = []
        started = time.monotonic()
        for number, attempt in enumerate(range(first_attempt, first_attempt + policy.max_attempts)):
            target_instance = (instance + number) % len(self.urls) if rotate else instance
            completion = self.send(request, process=process, attempt=attempt,
                                   instance=target_instance)
            completions.append(completion)
            if is_final(completion, self.target.promises, errors=errors):
                break
            if time.monotonic() - started > policy.deadline:
                break
            retry_after = (completion.headers or {}).get("retry-after")
            time.sleep(policy.delay(attempt - first_attempt + 1, retry_after, rng))
        return completions

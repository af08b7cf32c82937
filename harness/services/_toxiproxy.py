"""Toxiproxy: finding or starting the server, and a typed, thread-safe face for its API.

toxiproxy-python 0.1.1 keeps the API address in a class-level global (``APIConsumer.host``),
sends requests with no timeout, cannot update a toxic and returns nothing from ``add_toxic``.
This module is the only code that touches it: every call runs under one lock with the address
bound for that call and a timeout on every request, and errors come out as ``ToxiproxyError``.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx
import requests
import toxiproxy.api
from toxiproxy import Toxiproxy as _LibToxiproxy
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists
from toxiproxy.proxy import Proxy as _LibProxy

from harness._errors import ServiceUnavailable, ToxiproxyError
from harness.services import _containers
from harness.services._network import free_port, require_loopback
from harness.services._paths import find_tool
from harness.services._processes import ManagedProcess, start_on_a_free_port

__all__ = [
    "Stream",
    "Toxic",
    "ToxiproxyClient",
    "ToxiproxyProxy",
    "ToxiproxyServer",
    "start_toxiproxy",
]

Stream = Literal["upstream", "downstream"]

_INSTALL_FIX = (
    "run `make toxiproxy` (builds Shopify's toxiproxy v2.12.0 with Go >= 1.23), "
    "or download toxiproxy-server-linux-amd64 from "
    "https://github.com/Shopify/toxiproxy/releases/tag/v2.12.0 into .tools/toxiproxy-server, "
    "or set TOXIPROXY_URL=http://127.0.0.1:8474 to use a running server"
)


class _TimedRequests:
    """Stands in for the ``requests`` module inside toxiproxy-python to add a timeout."""

    def __init__(self) -> None:
        self.timeout = 5.0

    def get(self, **kwargs: Any) -> requests.Response:
        return requests.get(timeout=self.timeout, **kwargs)

    def post(self, **kwargs: Any) -> requests.Response:
        return requests.post(timeout=self.timeout, **kwargs)

    def delete(self, **kwargs: Any) -> requests.Response:
        return requests.delete(timeout=self.timeout, **kwargs)


_timed_requests = _TimedRequests()
toxiproxy.api.requests = _timed_requests
_api_lock = threading.RLock()


@dataclass(frozen=True, slots=True)
class Toxic:
    """One toxic as Toxiproxy knows it; ``attributes`` are the type's own (``timeout``, ...)."""

    type: str
    stream: Stream = "downstream"
    attributes: Mapping[str, int] = field(default_factory=dict)
    toxicity: float = 1.0
    name: str = ""

    @property
    def effective_name(self) -> str:
        return self.name or f"{self.type}_{self.stream}"


class ToxiproxyClient:
    """The API of one Toxiproxy server, bound to its address for every call."""

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        require_loopback(url)
        parts = urlsplit(url)
        if not parts.hostname or not parts.port:
            raise ValueError(f"Toxiproxy URL needs a host and a port: {url!r}")
        self.url = url.rstrip("/")
        self.host = parts.hostname
        self.port = parts.port
        self.timeout = timeout

    @contextmanager
    def _bound(self) -> Iterator[None]:
        """Point the library's global at this server for one call, and translate its errors."""
        with _api_lock:
            saved = (APIConsumer.host, APIConsumer.port, _timed_requests.timeout)
            APIConsumer.host, APIConsumer.port = self.host, self.port
            _timed_requests.timeout = self.timeout
            try:
                yield
            except (ProxyExists, NotFound, InvalidToxic) as exc:
                raise ToxiproxyError(f"Toxiproxy at {self.url} refused: {exc}") from exc
            except requests.RequestException as exc:
                raise ToxiproxyError(f"Toxiproxy at {self.url} did not answer: {exc}") from exc
            finally:
                APIConsumer.host, APIConsumer.port, _timed_requests.timeout = saved

    def version(self) -> str:
        with self._bound():
            raw = _LibToxiproxy().version()
        if raw is None:
            raise ToxiproxyError(f"Toxiproxy at {self.url} is not running")
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        try:
            return str(httpx.Response(200, content=text).json()["version"])
        except (ValueError, KeyError):
            return text.strip()

    def create_proxy(
        self, name: str, upstream: str, *, listen: str = "127.0.0.1:0"
    ) -> ToxiproxyProxy:
        """Create a proxy listening on ``listen`` (port 0: Toxiproxy picks a free one)."""
        require_loopback(upstream, allow_remote=os.environ.get("IDEM_ALLOW_REMOTE") == "1")
        with self._bound():
            lib_proxy = _LibToxiproxy().create(upstream=upstream, name=name, listen=listen)
        return ToxiproxyProxy(self, lib_proxy)

    def proxy_names(self) -> list[str]:
        with self._bound():
            return sorted(_LibToxiproxy().proxies())

    def reset(self) -> None:
        """Re-enable every proxy and remove every toxic."""
        with self._bound():
            _LibToxiproxy().reset()

    def delete_all(self) -> None:
        with self._bound():
            _LibToxiproxy().destroy_all()

    def _call(self, method: Literal["get", "post", "delete"], path: str, **kw: Any) -> Any:
        """A raw API call for what the library cannot do (updating a toxic)."""
        with self._bound():
            return getattr(APIConsumer, method)(path, **kw)


class ToxiproxyProxy:
    """One proxy: its listen address, and the toxics and switches that fault it."""

    def __init__(self, client: ToxiproxyClient, lib_proxy: _LibProxy) -> None:
        self._client = client
        self._proxy = lib_proxy
        self.name: str = lib_proxy.name
        self.listen: str = lib_proxy.listen
        self.upstream: str = lib_proxy.upstream

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])

    @property
    def url(self) -> str:
        return f"http://{self.listen}"

    def add_toxic(self, toxic: Toxic) -> str:
        """Add ``toxic`` and return the name Toxiproxy knows it by."""
        name = toxic.effective_name
        with self._client._bound():
            self._proxy.add_toxic(
                name=name,
                type=toxic.type,
                stream=toxic.stream,
                toxicity=toxic.toxicity,
                attributes=dict(toxic.attributes),
            )
        return name

    def update_toxic(self, name: str, attributes: Mapping[str, int]) -> None:
        self._client._call(
            "post", f"/proxies/{self.name}/toxics/{name}", json={"attributes": dict(attributes)}
        )

    def remove_toxic(self, name: str) -> None:
        with self._client._bound():
            self._proxy.destroy_toxic(name)

    def toxics(self) -> list[Toxic]:
        with self._client._bound():
            found = self._proxy.toxics()
        return [
            Toxic(t.type, t.stream, dict(t.attributes), float(t.toxicity), t.name)
            for t in found.values()
        ]

    def clear_toxics(self) -> None:
        for toxic in self.toxics():
            self.remove_toxic(toxic.effective_name)

    @contextmanager
    def toxic(self, toxic: Toxic) -> Iterator[str]:
        """The toxic is active inside the block and removed after it, whatever happens."""
        name = self.add_toxic(toxic)
        try:
            yield name
        finally:
            self.remove_toxic(name)

    def disable(self) -> None:
        """Stop listening and drop every open connection."""
        with self._client._bound():
            self._proxy.disable()

    def enable(self) -> None:
        with self._client._bound():
            self._proxy.enable()

    @contextmanager
    def down(self) -> Iterator[None]:
        self.disable()
        try:
            yield
        finally:
            self.enable()

    def delete(self) -> None:
        with self._client._bound():
            self._proxy.destroy()


class ToxiproxyServer:
    """A Toxiproxy server this process found or started; ``close`` stops what it started."""

    def __init__(self, url: str, *, origin: str, stopper: Any = None,
                 scratch: Path | None = None) -> None:
        self.url = url
        self.origin = origin
        self.client = ToxiproxyClient(url)
        self._stopper = stopper
        self._scratch = scratch  # a log directory of its own, removed with the server

    @property
    def pid(self) -> int | None:
        return self._stopper.pid if isinstance(self._stopper, ManagedProcess) else None

    def close(self) -> None:
        if self._stopper is not None:
            self._stopper.stop()  # a ManagedProcess or a testcontainers container
            self._stopper = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def __enter__(self) -> ToxiproxyServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_toxiproxy(*, log_dir: Path | None = None) -> ToxiproxyServer:
    """Find or start Toxiproxy: ``TOXIPROXY_URL``, a local binary, testcontainers, or an error.

    A server found through ``TOXIPROXY_URL`` belongs to someone else: it is used, not stopped.
    Its log goes to ``log_dir`` (a run's report directory keeps it beside the run); without
    one, to a temporary directory removed when the server stops: Toxiproxy logs every
    connection, tens of megabytes over a test session, which nobody asked to keep.
    """
    env_url = os.environ.get("TOXIPROXY_URL")
    if env_url:
        server = ToxiproxyServer(env_url, origin="TOXIPROXY_URL")
        try:
            server.client.version()
        except ToxiproxyError as exc:
            raise ServiceUnavailable(
                "Toxiproxy",
                f"TOXIPROXY_URL={env_url} does not answer ({exc})",
                "start that server, or unset TOXIPROXY_URL to let the harness start its own",
            ) from exc
        return server

    binary = find_tool("toxiproxy-server", env_var="IDEM_TOXIPROXY_BIN")
    if binary is not None:
        scratch = None
        if log_dir is None:
            scratch = Path(tempfile.mkdtemp(prefix="idem-toxiproxy-"))
            atexit.register(shutil.rmtree, scratch, True)  # also when nobody closes it

        def toxiproxy_on(port: int) -> ManagedProcess:
            return ManagedProcess(
                "Toxiproxy",
                [str(binary), "-host", "127.0.0.1", "-port", str(port)],
                log_path=(log_dir or scratch or Path()) / f"toxiproxy-{port}.log",
                ready_url=f"http://127.0.0.1:{port}/version",
            )

        try:
            port, process = start_on_a_free_port("127.0.0.1", toxiproxy_on)
        except BaseException:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
            raise
        return ToxiproxyServer(f"http://127.0.0.1:{port}", origin=str(binary), stopper=process,
                               scratch=scratch)

    if _containers.docker_answers():
        port = free_port()
        container = _containers.toxiproxy_container(port)
        return ToxiproxyServer(
            f"http://127.0.0.1:{port}", origin="testcontainers", stopper=container
        )

    raise ServiceUnavailable(
        "Toxiproxy", "no TOXIPROXY_URL, no toxiproxy-server binary, no Docker engine", _INSTALL_FIX
    )

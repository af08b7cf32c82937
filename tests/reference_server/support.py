"""Driving a live reference server process from a test: start, request, ask the admin door.

Every wait is a bounded poll of something observable (an admin endpoint, a thread's result),
never a bare sleep; every burst of traffic is a fixed number of requests under a timeout.
"""

from __future__ import annotations

import itertools
import socket
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from harness.services._network import free_port
from harness.services._processes import ManagedProcess

__all__ = [
    "CHARGE",
    "Server",
    "concurrently",
    "first_answers",
    "in_thread",
    "new_key",
    "new_tenant",
    "raw_exchange",
    "wait_until",
]

T = TypeVar("T")

CHARGE: dict[str, Any] = {"amount": 1250, "currency": "EUR", "customer": "cus_42"}
# Made once: httpx builds a fresh one for every client otherwise, ~40 ms each (all traffic
# here is plain HTTP on loopback; the context is never used).
_TLS = ssl.create_default_context()
_names = itertools.count()


def new_key() -> str:
    return f"key-{uuid.uuid4().hex}"


def new_tenant() -> str:
    return f"tenant-{uuid.uuid4().hex[:12]}"


def wait_until(predicate: Callable[[], bool], what: str, *, timeout: float = 10.0,
               every: float = 0.02) -> None:
    """Poll ``predicate`` every ``every`` seconds until it holds; fail naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def in_thread(
    action: Callable[[], httpx.Response],
) -> tuple[threading.Thread, list[httpx.Response]]:
    """Start ``action`` in a thread; the list receives its response (join the thread first)."""
    results: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: results.append(action()), daemon=True)
    thread.start()
    return thread, results


def concurrently(count: int, action: Callable[[int], T], *, timeout: float = 30.0) -> list[T]:
    """Run ``action(i)`` in ``count`` threads released together by a barrier."""
    barrier = threading.Barrier(count)

    def run(index: int) -> T:
        barrier.wait(timeout=timeout)
        return action(index)

    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(run, index) for index in range(count)]
        return [future.result(timeout=timeout) for future in futures]


def first_answers(responses: list[httpx.Response]) -> list[httpx.Response]:
    """The responses that ran the work: 201s that are not replays."""
    return [r for r in responses if r.status_code == 201 and "idempotent-replayed" not in r.headers]


class Server:
    """One reference server process on a free loopback port; restartable after a crash."""

    def __init__(self, options: Sequence[str], *, store: str, log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store = store
        self.command = [
            sys.executable, "-m", "reference_server", "--port", str(self.port),
            "--store", store, "--log-level", "warning", *options,
        ]
        self.process = ManagedProcess(
            f"reference-server-{next(_names)}",
            self.command,
            log_path=log_dir / f"reference-server-{self.port}.log",
            ready_url=f"{self.url}/_admin/health",
            start_timeout=20.0,
        )

    def start(self) -> Server:
        self.process.start()
        return self

    def stop(self) -> None:
        self.process.stop()

    def wait_exit(self, timeout: float = 10.0) -> int | None:
        return self.process.wait_exit(timeout)

    @contextmanager
    def client(self, *, timeout: float = 15.0) -> Iterator[httpx.Client]:
        with httpx.Client(base_url=self.url, timeout=timeout, verify=_TLS) as client:
            yield client

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with self.client() as client:
            return client.request(method, path, **kwargs)

    def post(
        self, key: str | None, body: Any = None, *, tenant: str | None = None,
        headers: dict[str, str] | None = None, content: bytes | None = None,
        timeout: float = 15.0,
    ) -> httpx.Response:
        """POST /charges with ``key`` (sent as an sf-string) and ``body`` (default CHARGE)."""
        sent = self.headers(key, tenant=tenant, extra=headers)
        with self.client(timeout=timeout) as client:
            if content is not None:
                return client.post("/charges", content=content, headers=sent)
            return client.post("/charges", json=CHARGE if body is None else body, headers=sent)

    @staticmethod
    def headers(
        key: str | None, *, tenant: str | None = None, extra: dict[str, str] | None = None
    ) -> dict[str, str]:
        sent = dict(extra or {})
        if key is not None:
            sent["Idempotency-Key"] = f'"{key}"'
        if tenant is not None:
            sent["Authorization"] = f"Bearer {tenant}"
        return sent

    # -- the admin door -------------------------------------------------------------------

    def admin(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, f"/_admin/{path}", **kwargs)
        response.raise_for_status()
        return response.json()

    def effects(self, key: str | None, *, tenant: str = "") -> list[str]:
        params = {"tenant": tenant} if key is None else {"tenant": tenant, "key": key}
        result = self.admin("GET", "effects", params=params)
        assert result["count"] == len(result["charge_ids"])
        ids: list[str] = result["charge_ids"]
        return ids

    def keys(self) -> dict[str, Any]:
        stats: dict[str, Any] = self.admin("GET", "keys")
        return stats

    def health(self) -> dict[str, Any]:
        health: dict[str, Any] = self.admin("GET", "health")
        return health

    def advance(self, seconds: float) -> str:
        now: str = self.admin("POST", "clock/advance", json={"seconds": seconds})["now"]
        return now

    def cleanup(self) -> int:
        deleted: int = self.admin("POST", "cleanup")["deleted"]
        return deleted

    def wait_in_progress(self, at_least: int = 1) -> None:
        """Until the store holds ``at_least`` claimed keys (a request is inside its handler)."""
        wait_until(lambda: self.keys()["in_progress"] >= at_least, "a claimed key")


def raw_exchange(port: int, request: bytes, *, timeout: float = 10.0) -> tuple[int, bytes]:
    """Send ``request`` bytes as they are (no client library tidying them) and return the
    status code and the raw response; the request should say ``Connection: close``."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        chunks: list[bytes] = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    response = b"".join(chunks)
    status_line = response.split(b"\r\n", 1)[0]
    return int(status_line.split()[1]), response

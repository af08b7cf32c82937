"""The protocol-aware store proxy: sees the target's writes, strikes right after one of them.

It sees the target's writes on the wire and can strike right after one of them, on the store's
acknowledgement, with no hook in the target's code.

It sits between Toxiproxy's store proxy and the store (target -> Toxiproxy -> this proxy ->
store), so every toxic and the store-down switch act as before, and ``{store_proxy}`` stays
Toxiproxy's address.  It reads PostgreSQL's protocol v3 (``_pg_wire``) or RESP (``_resp_wire``),
forwards everything as it arrives, and holds back only the server bytes that may acknowledge a
commit until it has decided what they are.

A request's writes are found two ways (``Watch``): a write whose statement or command carries
the watched key (in its text or parameters) is that request's; a write that carries no watched
key is the request's when it is the only one watched (a time window: the scenario keeps one
request of the key in flight) and carries no key watched before (a late write of an earlier
request).  When a watch asks for it, the proxy strikes after the Nth of
its request's writes, on that write's acknowledgement: it drops the acknowledgement and cuts
the connection, holds it for a time, or has the target killed first.  It runs an event loop
of its own in a daemon thread; the callbacks a watch carries run in that thread.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Literal, Protocol, cast

import uvloop

from harness._errors import ServiceError
from harness.services._pg_wire import Committed, PgConnection, Segment
from harness.services._resp_wire import RespConnection

__all__ = ["AfterWrite", "CommitProxy", "StoreFault", "Watch", "WatchListener", "WriteSeen"]

WireProtocol = Literal["postgresql", "redis"]
StoreFault = Literal["cut", "hold", "kill"]
#: How long the store connection must stay without a write before a watched request's writes
#: are taken as done: a library may store its response just after answering.
QUIET = 0.3


class _Tracker(Protocol):
    unreadable: str | None

    @property
    def relays_client_bytes(self) -> bool: ...

    def from_client(self, data: bytes) -> tuple[bytes, bytes]: ...

    def from_server(self, data: bytes) -> list[Segment]: ...


@dataclass(frozen=True, slots=True)
class AfterWrite:
    """Strike after the request's ``write``-th committed write (from 1): ``cut`` drops the
    acknowledgement and cuts the connection, ``hold`` keeps it back ``hold`` seconds, ``kill``
    kills the target (the listener does) and then cuts."""

    write: int
    fault: StoreFault
    hold: float = 0.0

    def __post_init__(self) -> None:
        if self.write < 1:
            raise ValueError(f"writes are counted from 1, not {self.write}")


@dataclass(frozen=True, slots=True)
class WriteSeen:
    """One committed write a watch claimed: its number, its statements' kinds, how it
    committed, and whether the key was in it (``key``) or only its time (``window``)."""

    number: int
    kinds: tuple[str, ...]
    how: str
    matched: Literal["key", "window"]
    connection: int
    at: float

    def describe(self) -> dict[str, object]:
        return {"write": self.number, "kinds": list(self.kinds), "commit": self.how,
                "matched": self.matched, "connection": self.connection}


class WatchListener(Protocol):
    """What a watch tells as it goes, in the proxy's thread (the nemesis records it)."""

    def wrote(self, watch: Watch, write: WriteSeen) -> None: ...

    def striking(self, watch: Watch, write: WriteSeen) -> None: ...

    def released(self, watch: Watch, write: WriteSeen) -> None: ...


@dataclass
class Watch:
    """The writes of one request, identified by its key; optionally a fault to strike."""

    key: str
    tenant: str | None
    plan: AfterWrite | None
    listener: WatchListener
    writes: list[WriteSeen] = field(default_factory=list)
    struck: WriteSeen | None = None
    released_at: float | None = None
    last_write: float = 0.0

    @property
    def missed(self) -> bool:
        """Was a fault planned that never struck (the request made fewer writes)?"""
        return self.plan is not None and self.struck is None


class CommitProxy:
    """A TCP proxy that reads one store protocol; ``start`` it, point Toxiproxy at ``listen``."""

    def __init__(self, upstream: str, protocol: WireProtocol, *, host: str = "127.0.0.1") -> None:
        upstream_host, _, port = upstream.rpartition(":")
        self.upstream = (upstream_host.strip("[]"), int(port))
        self.protocol = protocol
        self.host = host
        self.listen = ""
        # libuv's loop: every store round trip crosses this loop twice, and asyncio's own
        # costs about 50 us more a round trip (bench/store_proxy.py).
        self._loop = uvloop.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="commit-proxy",
                                        daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._watches: list[Watch] = []
        #: Keys watched before (the latest ones): their writes are nobody's now.
        self._watched_before: deque[str] = deque(maxlen=256)
        self._changed = threading.Condition()
        self._connections = 0
        self._pairs: set[_Pair] = set()
        #: Why a connection's bytes could not be read in ``protocol``, the first time it happened.
        self.unreadable: str | None = None
        self.last_write = 0.0

    # ---- lifecycle ----------------------------------------------------------------------

    def start(self) -> CommitProxy:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        try:
            future.result(timeout=10)
        except OSError as exc:
            self.close()
            raise ServiceError(f"the store proxy could not listen on {self.host}: {exc}") from exc
        return self

    async def _serve(self) -> None:
        self._server = await self._loop.create_server(lambda: _ClientSide(self), self.host, 0)
        # uvloop's servers and transports have asyncio's interface, not its classes.
        port = cast(asyncio.Server, self._server).sockets[0].getsockname()[1]
        self.listen = f"{self.host}:{port}"

    def close(self) -> None:
        """Stop listening and drop every connection; safe to call twice."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for pair in list(self._pairs):
                pair.cut()

        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> CommitProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- watches ------------------------------------------------------------------------

    @contextmanager
    def watching(self, key: str, tenant: str | None, listener: WatchListener, *,
                 plan: AfterWrite | None = None) -> Iterator[Watch]:
        """Count the writes of the request with ``key`` while the block runs (and strike as
        ``plan`` says); the block should end with ``settle``."""
        watch = Watch(key, tenant, plan, listener)
        with self._changed:
            self._watches.append(watch)
        try:
            yield watch
        finally:
            with self._changed:
                self._watches.remove(watch)
                self._watched_before.append(key)

    def settle(self, watch: Watch, *, quiet: float = QUIET, limit: float = 5.0) -> None:
        """Return once no write has reached the store for ``quiet`` seconds and a held
        acknowledgement is released, or after ``limit``: the request's late writes (a response
        stored after the answer) are counted too."""
        deadline = time.monotonic() + limit
        with self._changed:
            while True:
                now = time.monotonic()
                holding = watch.struck is not None and watch.plan is not None and (
                    watch.plan.fault == "hold" and watch.released_at is None)
                wait = (self.last_write + quiet - now) if not holding else quiet
                if (wait <= 0 and not holding) or now >= deadline:
                    return
                self._changed.wait(min(max(wait, 0.01), deadline - now))

    def _claim(self, committed: Committed, connection: int) -> tuple[Watch, WriteSeen] | None:
        """The watch a committed write belongs to, and the write as that watch counts it."""
        now = time.monotonic()
        self.last_write = now
        if not self._watches:  # the common case, a run's ordinary traffic: no lock taken
            return None
        with self._changed:
            owners = [w for w in self._watches if committed.mentions(w.key)]
            matched: Literal["key", "window"] = "key"
            if not owners and len(self._watches) == 1 and not any(
                    committed.mentions(key) for key in self._watched_before):
                owners, matched = self._watches, "window"  # a late write of an earlier
                # request (one that names its key) is never taken for the one watched now
            result = None
            if len(owners) == 1:
                watch = owners[0]
                write = WriteSeen(len(watch.writes) + 1, committed.kinds, committed.how, matched,
                                  connection, now)
                watch.writes.append(write)
                watch.last_write = now
                result = (watch, write)
            self._changed.notify_all()
            return result

    def _released(self, watch: Watch, write: WriteSeen) -> None:
        with self._changed:
            watch.released_at = time.monotonic()
            self._changed.notify_all()
        watch.listener.released(watch, write)

    # ---- connections (the proxy's thread) -----------------------------------------------

    def _tracker(self) -> _Tracker:
        return PgConnection() if self.protocol == "postgresql" else RespConnection()

    def _new_pair(self, client: _ClientSide) -> _Pair:
        self._connections += 1
        pair = _Pair(self, client, self._tracker(), self._connections)
        self._pairs.add(pair)
        return pair

    def _unreadable(self, why: str) -> None:
        if self.unreadable is None:
            self.unreadable = why


class _Pair:
    """One target connection and the store connection opened for it."""

    def __init__(self, proxy: CommitProxy, client: _ClientSide, tracker: _Tracker,
                 number: int) -> None:
        self.proxy = proxy
        self.client = client
        self.tracker = tracker
        self.number = number
        self.store: asyncio.Transport | None = None
        self.early = bytearray()  # client bytes sent before the store connection was up
        # While a hold lasts: the server bytes already read, kept back, and those that came
        # after, still to read; None when nothing is held.
        self.held: list[bytes] | None = None
        self.unread: list[bytes] = []
        #: The server bytes the tracker keeps (a message's tail, a held answer's start), and how
        #: many of them were sent on ahead while no watch looked: left out when it hands them back.
        self.kept = 0
        self.sent_ahead = 0
        self.store_gone = False
        self.closed = False

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, _ = await loop.create_connection(lambda: _StoreSide(self),
                                                        *self.proxy.upstream)
        except OSError:
            self.cut()
            return
        self.store = transport
        if self.closed:
            transport.abort()
        elif self.early:
            transport.write(bytes(self.early))
            self.early.clear()

    def from_client(self, data: bytes) -> None:
        if self.store is not None and self.tracker.relays_client_bytes:
            # They pass as they came: the store starts on them while the tracker reads them.
            self.store.write(data)
            self.tracker.from_client(data)
            self._check_readable()
            return
        forward, answer = self.tracker.from_client(data)
        if answer:
            self.client.write(answer)
        if forward:
            if self.store is None:
                self.early += forward
            else:
                self.store.write(forward)
        self._check_readable()

    def from_store(self, data: bytes) -> None:
        if self.held is not None:
            self.unread.append(data)  # a hold keeps the order: everything after waits too
            return
        if not self.proxy._watches and self.kept == self.sent_ahead:
            # Nothing to decide and nothing kept back: the bytes go on as they came, and are
            # read after (for the connection's state, and the time of its writes).
            self.client.write(data)
            segments = self._read_server(data)
            self.sent_ahead = self.kept
            if any(segment.committed is not None for segment in segments):
                self.proxy.last_write = time.monotonic()
            return
        segments = self._not_sent(self._read_server(data))
        for position, segment in enumerate(segments):
            if segment.committed is None:
                self.client.write(segment.data)
                continue
            claimed = self.proxy._claim(segment.committed, self.number)
            if claimed is None:
                self.client.write(segment.data)
                continue
            watch, write = claimed
            plan = watch.plan
            if plan is None or watch.struck is not None or write.number != plan.write:
                self.client.write(segment.data)
                watch.listener.wrote(watch, write)
                continue
            watch.struck = write
            watch.listener.wrote(watch, write)
            watch.listener.striking(watch, write)  # kills the target first for "kill"
            if plan.fault == "hold":
                self.held = [segment.data] + [s.data for s in segments[position + 1:]]
                asyncio.get_running_loop().call_later(plan.hold, self._release, watch, write)
                return
            self.cut()
            self.proxy._released(watch, write)
            return

    def _read_server(self, data: bytes) -> list[Segment]:
        segments = self.tracker.from_server(data)
        self.kept += len(data) - sum(len(segment.data) for segment in segments)
        self._check_readable()
        return segments

    def _not_sent(self, segments: list[Segment]) -> list[Segment]:
        """``segments`` less the bytes at their head that were sent ahead; an acknowledgement
        whose start went ahead still strikes on the rest (its watch began in the middle)."""
        kept = []
        for segment in segments:
            if self.sent_ahead >= len(segment.data) > 0:
                self.sent_ahead -= len(segment.data)
                segment = Segment(b"", segment.committed)
            elif self.sent_ahead:
                segment = Segment(segment.data[self.sent_ahead:], segment.committed)
                self.sent_ahead = 0
            kept.append(segment)
        return kept

    def _release(self, watch: Watch, write: WriteSeen) -> None:
        held, unread = self.held or [], self.unread
        self.held, self.unread = None, []
        self.proxy._released(watch, write)
        if self.closed:
            return
        self.client.write(b"".join(held))
        for data in unread:
            self.from_store(data)
        if self.store_gone:
            self.end()

    def _check_readable(self) -> None:
        if self.tracker.unreadable is not None:
            self.proxy._unreadable(self.tracker.unreadable)

    def end(self) -> None:
        """The store closed: close the target's side too, after what was sent to it."""
        if not self.closed:
            self.closed = True
            self.client.close()
            self.proxy._pairs.discard(self)

    def cut(self) -> None:
        """Close both sides at once, the target's with a reset: nothing held goes through."""
        if self.closed:
            return
        self.closed = True
        self.client.reset()
        if self.store is not None:
            self.store.abort()
        self.proxy._pairs.discard(self)


class _ClientSide(asyncio.Protocol):
    def __init__(self, proxy: CommitProxy) -> None:
        self.proxy = proxy
        self.transport: asyncio.Transport | None = None
        self.pair: _Pair | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.pair = self.proxy._new_pair(self)
        asyncio.get_running_loop().create_task(self.pair.connect())

    def data_received(self, data: bytes) -> None:
        assert self.pair is not None
        self.pair.from_client(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.pair is not None:
            self.pair.cut()

    def write(self, data: bytes) -> None:
        if self.transport is not None and data:
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def reset(self) -> None:
        if self.transport is None:
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:  # linger 0: the close is a reset, as when a link drops
            with suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()


class _StoreSide(asyncio.Protocol):
    def __init__(self, pair: _Pair) -> None:
        self.pair = pair

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.pair.from_store(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.pair.held is None:
            self.pair.end()
        else:  # what is held still goes to the target when the hold ends, then the close
            self.pair.store_gone = True

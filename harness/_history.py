"""The history: every operation of a run as plain, frozen events.

Jepsen's model: an operation is an ``invoke`` event and later one completion, ``ok`` (it
happened), ``fail`` (it certainly did not) or ``info`` (nobody knows: a timeout or a reset after
the request left, so the charge may have committed).  Clients and the nemesis only append; the
checker only reads; nothing else is an input to judgement, so a saved history can be judged again
without touching the target.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, get_args

__all__ = [
    "NEMESIS",
    "ORACLE",
    "STORE",
    "Event",
    "EventType",
    "History",
    "event_from_json",
    "event_to_json",
]

EventType = Literal["invoke", "ok", "fail", "info"]
NEMESIS = "nemesis"
ORACLE = "oracle"
#: The process of ``store-write`` events: the target's writes the store proxy saw committed.
STORE = "store"


@dataclass(frozen=True, slots=True)
class Event:
    """One step of one operation.

    ``f`` names the operation: ``request`` (an HTTP attempt), ``fault``/``heal`` (a toxic, a
    disabled proxy), ``crash``/``restart`` (the target process), ``clock`` (the target's clock
    advanced), ``effects`` (the oracle's count for a key) and ``store-size`` (the key table).
    Request fields are flat and optional, like the keys of a Jepsen op map: an invoke carries what
    was sent, its completion what came back.  ``value`` holds anything else, as JSON data.
    """

    index: int
    type: EventType
    f: str
    process: str
    time: float
    op: int
    key: str | None = None
    tenant: str | None = None
    attempt: int | None = None
    label: str | None = None
    method: str | None = None
    path: str | None = None
    fingerprint: str | None = None
    body: str | None = None
    key_header: str | None = None
    status: int | None = None
    headers: Mapping[str, str] | None = None
    body_digest: str | None = None
    resource: str | None = None
    error: str | None = None
    value: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_request(self) -> bool:
        return self.f == "request"

    @property
    def identity(self) -> tuple[str | None, str | None]:
        """The (tenant, key) pair that idempotency is scoped to."""
        return (self.tenant, self.key)


_FIELD_NAMES = {f.name for f in fields(Event)}


def event_to_json(event: Event) -> dict[str, Any]:
    """The event as a JSON object, leaving out fields that are empty."""
    data = asdict(event)
    return {k: v for k, v in data.items() if v not in (None, {}) or k in ("index", "op")}


def event_from_json(data: Mapping[str, Any]) -> Event:
    unknown = set(data) - _FIELD_NAMES
    if unknown:
        raise ValueError(f"unknown event fields {sorted(unknown)}")
    if data.get("type") not in get_args(EventType):
        raise ValueError(f"event type must be one of {get_args(EventType)}, got {data.get('type')}")
    return Event(**data)


class History:
    """An append-only, thread-safe list of events with monotonic times from its creation.

    Listeners see each event as it is appended; the terminal narration of the training demo is one.
    """

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._events: list[Event] = list(events)
        self._lock = threading.Lock()
        self._next_op = max((e.op for e in self._events), default=-1) + 1
        self._started = time.monotonic() - (self._events[-1].time if self._events else 0.0)
        self._listeners: list[Callable[[Event], None]] = []

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        self._listeners.append(listener)

    def now(self) -> float:
        return time.monotonic() - self._started

    def invoke(self, f: str, process: str, **fields_: Any) -> Event:
        """Append the invocation of a new operation and return it; its ``op`` links completions."""
        with self._lock:
            op = self._next_op
            self._next_op += 1
            event = self._append_locked("invoke", f, process, op, fields_)
        self._notify(event)
        return event

    def complete(self, invocation: Event, type_: EventType, **fields_: Any) -> Event:
        """Append the completion of ``invocation``; identity fields are copied from it."""
        if type_ == "invoke":
            raise ValueError("a completion cannot be an invoke")
        carried = {
            "key": invocation.key,
            "tenant": invocation.tenant,
            "attempt": invocation.attempt,
            "label": invocation.label,
        }
        with self._lock:
            event = self._append_locked(
                type_, invocation.f, invocation.process, invocation.op, {**carried, **fields_}
            )
        self._notify(event)
        return event

    def record(self, type_: EventType, f: str, process: str, **fields_: Any) -> Event:
        """Append a single event that is its own operation (an observation, a nemesis mark)."""
        with self._lock:
            op = self._next_op
            self._next_op += 1
            event = self._append_locked(type_, f, process, op, fields_)
        self._notify(event)
        return event

    def intend(self, what: str, key: str | None, properties: Sequence[str], *,
               tenant: str | None = None, **details: Any) -> Event:
        """Record what a scenario's next step is meant to bring about for ``key`` (``what``: a
        precondition a checker knows, such as ``copies-met``), so the checker can tell from
        the evidence whether it did, and call the ``properties`` it was for unknown if not."""
        return self.record("info", "intent", NEMESIS, key=key, tenant=tenant,
                           value={"what": what, "properties": list(properties), **details})

    def _append_locked(
        self, type_: EventType, f: str, process: str, op: int, fields_: Mapping[str, Any]
    ) -> Event:
        event = Event(
            index=len(self._events), type=type_, f=f, process=process, time=self.now(), op=op,
            **fields_,
        )
        self._events.append(event)
        return event

    def _notify(self, event: Event) -> None:
        for listener in self._listeners:
            listener(event)

    def events(self) -> tuple[Event, ...]:
        with self._lock:
            return tuple(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events())

    def __len__(self) -> int:
        with self._lock:
            return len(self._events)

    def __getitem__(self, index: int) -> Event:
        with self._lock:
            return self._events[index]

    def to_jsonl(self, **extra: Any) -> str:
        """One JSON object a line; ``extra`` fields (the scenario name) are added to each."""
        return "".join(
            json.dumps({**extra, **event_to_json(e)}, sort_keys=True) + "\n" for e in self.events()
        )

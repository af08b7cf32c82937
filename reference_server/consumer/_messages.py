"""Reading one delivery: its dedup key, its charge, and the test headers.

The dedup key is the client's header (``--dedup-header``, matched without regard to case) or,
when the message has none, its message id; either is a key as the HTTP server accepts it (1 to
255 printable ASCII characters).  A Kafka record may carry its key instead in the record's own
key, or in a field of its JSON body (``DedupSource``); a Kafka record has no message id, and a
missing key is then poison, never a fallback to its place in the log.  The body is a charge
exactly as ``POST /charges`` takes it, checked by the same ``parse_charge``.  A message that
fails any of this is ``Poison``: no retry can make it valid, so the worker dead-letters it at
once.

``origin_key`` is the key by the correct rule whatever a flaw claims, and goes into the ledger
beside each charge, so the harness's oracle counts effects per client key even when a flaw
deduplicates on something else (as the HTTP server's ``client_key`` does).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from reference_server._charges import ChargeFields, InvalidCharge, parse_charge
from reference_server._fingerprint import InvalidJson, canonical_json, fingerprint
from reference_server._keys import InvalidKey, parse_key

__all__ = [
    "MAX_TEST_PAUSE_MS",
    "DedupSource",
    "Delivery",
    "Job",
    "PausePoint",
    "Poison",
    "TestPause",
    "dedup_keys",
    "read_job",
]

MAX_TEST_PAUSE_MS = 600_000
DedupSource = Literal["header", "key", "body"]
"""Where the dedup key is: a header, the record's own key (Kafka), or a field of the body."""
PAUSE_HEADER = "x-test-pause"
FAULT_HEADER = "x-test-fault"


class Poison(ValueError):
    """The message can never be processed; the message says why.  ``key`` is its dedup key by
    the correct rule, when it has a usable one."""

    def __init__(self, reason: str, key: str | None = None) -> None:
        super().__init__(reason)
        self.key = key


class PausePoint(enum.StrEnum):
    BEFORE_WORK = "before-work"
    """The key is claimed, nothing is committed."""
    BEFORE_ACK = "before-ack"
    """The work is committed, the ack not yet sent."""


@dataclass(frozen=True, slots=True)
class TestPause:
    point: PausePoint
    seconds: float


#: ``X-Test-Fault`` values: where the work fails, and whether a redelivery fails again.
#: ``handler-error`` is the older name of ``before-work:every``.
FAULTS = {"before-work": ("before-work", False), "after-work": ("after-work", False),
          "before-work:every": ("before-work", True), "after-work:every": ("after-work", True),
          "handler-error": ("before-work", True)}


@dataclass(frozen=True, slots=True)
class Delivery:
    """One delivery as the worker sees it, whatever AMQP client brought it."""

    body: bytes
    headers: Mapping[str, Any]
    message_id: str | None
    redelivered: bool
    delivery_count: int
    """Earlier deliveries of this message (a quorum queue's ``x-delivery-count``; 0 first)."""
    key: bytes | None = None
    """The record's own key (Kafka); AMQP messages have none."""
    raw_headers: tuple[tuple[str, Any], ...] = ()
    """The headers as they came, repeats kept (Kafka allows one name twice); empty: ``headers``."""
    event_fields: Mapping[str, Any] | None = None
    """What the deliver event says besides the key (a Kafka record's topic, partition, offset)."""

    def header(self, name: str) -> Any:
        """The value of header ``name`` in any letter case; ``Poison`` when the message
        carries it in two spellings (``Idempotency-Key`` and ``idempotency-key``): picking one
        would be a guess, as two ``Idempotency-Key`` headers of an HTTP request are."""
        wanted = name.lower()
        pairs = self.raw_headers or tuple(self.headers.items())
        found = [(key, value) for key, value in pairs if key.lower() == wanted]
        if len(found) > 1:
            spellings = " and ".join(repr(key) for key, _ in found)
            raise Poison(f"the message carries the {name} header twice ({spellings}): which "
                         "one holds the key is ambiguous; send it once")
        return found[0][1] if found else None


@dataclass(frozen=True, slots=True)
class Job:
    key: str
    """The key this consumer claims (a flaw may choose it wrongly)."""
    origin_key: str
    """The key by the correct rule, recorded with each charge for the oracle."""
    fields: ChargeFields
    fingerprint: str
    pause: TestPause | None = None
    fail: str | None = None
    """``X-Test-Fault``: where the work raises (``before-work``, ``after-work``), as a
    transient failure would."""


def _key(value: Any, what: str) -> str:
    if isinstance(value, str):
        value = value.encode("utf-8")
    if not isinstance(value, bytes):
        raise Poison(f"the {what} must be a string, not {type(value).__name__}")
    try:
        return parse_key([value], http_header=False)
    except InvalidKey as exc:
        raise Poison(f"the {what} is not a usable key: {exc}") from None


def dedup_keys(
    delivery: Delivery, *, dedup_header: str, key_from_header: bool,
    source: DedupSource = "header", field: str = "key", body: Any = None,
    message_id_fallback: bool = True,
) -> tuple[str, str]:
    """``(key to claim, key by the correct rule)``; ``Poison`` when there is none.

    ``source`` says where the client's key is; ``body`` is the parsed body, for ``"body"``.
    Without a key there, the message id stands in when ``message_id_fallback`` (AMQP: a
    producer-chosen id); a Kafka record has no message id of the producer's.
    """
    message_id = None if delivery.message_id is None else _key(delivery.message_id, "message id")
    if source == "key":
        raw, where = delivery.key, "record key"
    elif source == "body":
        raw = body.get(field) if isinstance(body, dict) else None
        where = f"body field {field!r}"
    else:
        raw, where = delivery.header(dedup_header), f"{dedup_header} header"
    origin = _key(raw, where) if raw is not None else message_id if message_id_fallback else None
    if origin is None:
        if not message_id_fallback:
            raise Poison(f"the message has no {where}: there is nothing to deduplicate it by")
        raise Poison(f"the message has no {dedup_header} header and no message id: there is "
                     "nothing to deduplicate it by")
    claimed = origin if key_from_header else message_id
    if claimed is None:
        raise Poison("the message has no message id")
    return claimed, origin


def _text(value: Any) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _test_headers(delivery: Delivery) -> tuple[TestPause | None, str | None]:
    """The test hooks a delivery carries out.  Each applies to the message's first delivery
    only (a redelivered copy runs normally), unless its value ends in ``:every``."""
    first = not delivery.redelivered and delivery.delivery_count == 0
    pause = None
    raw_pause = delivery.header(PAUSE_HEADER)
    if raw_pause is not None:
        text = _text(raw_pause).strip()
        body, every = (text[:-len(":every")], True) if text.endswith(":every") else (text, False)
        point, _, millis = body.partition(":")
        try:
            pause_point = PausePoint(point)
        except ValueError:
            pause_point = None
        if pause_point is None or not millis.isdigit() or int(millis) > MAX_TEST_PAUSE_MS:
            raise Poison(f"X-Test-Pause must be before-work:MS or before-ack:MS with MS from 0 "
                         f"to {MAX_TEST_PAUSE_MS}, optionally ending in :every, not {text!r}")
        if first or every:
            pause = TestPause(pause_point, int(millis) / 1000)
    raw_fault = delivery.header(FAULT_HEADER)
    fail = None
    if raw_fault is not None:
        fault = FAULTS.get(_text(raw_fault).strip())
        if fault is None:
            raise Poison(f"X-Test-Fault must be one of {', '.join(FAULTS)}")
        when, every = fault
        fail = when if first or every else None
    return pause, fail


def read_job(
    delivery: Delivery, *, dedup_header: str, key_from_header: bool = True,
    test_faults: bool = False, dedup_source: DedupSource = "header", dedup_field: str = "key",
    message_id_fallback: bool = True,
) -> Job:
    """The job a delivery asks for, or ``Poison`` saying why there is none.  With the key in a
    body field, the charge is the rest of the body."""
    document: Any = None
    if dedup_source == "body":
        try:
            document = json.loads(canonical_json(delivery.body))
        except InvalidJson as exc:
            raise Poison(f"not a valid charge: {exc}") from None
    key, origin = dedup_keys(delivery, dedup_header=dedup_header,
                             key_from_header=key_from_header, source=dedup_source,
                             field=dedup_field, body=document,
                             message_id_fallback=message_id_fallback)
    try:
        canonical = canonical_json(delivery.body)
        charge = json.loads(canonical)
        if dedup_source == "body" and isinstance(charge, dict):
            charge.pop(dedup_field, None)
        fields = parse_charge(charge)
        pause, fail = _test_headers(delivery) if test_faults else (None, None)
    except (InvalidJson, InvalidCharge) as exc:
        raise Poison(f"not a valid charge: {exc}", origin) from None
    except Poison as exc:
        raise Poison(str(exc), origin) from None
    return Job(key, origin, fields, fingerprint("MESSAGE", "charges", canonical), pause, fail)

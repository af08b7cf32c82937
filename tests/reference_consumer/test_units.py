"""The consumer's pure parts, without a broker: reading a delivery and the event feed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from reference_server.consumer._events import EventLog
from reference_server.consumer._messages import Delivery, PausePoint, Poison, read_job

CHARGE = json.dumps({"amount": 100, "currency": "EUR"}).encode()


def _delivery(body: bytes = CHARGE, message_id: str | None = "m-1", **headers: Any) -> Delivery:
    return Delivery(body=body, headers=headers, message_id=message_id, redelivered=False,
                    delivery_count=0)


def test_the_header_is_the_key_and_the_message_id_the_fallback() -> None:
    assert read_job(_delivery(**{"idempotency-key": "k-1"}),
                    dedup_header="Idempotency-Key").key == "k-1"
    assert read_job(_delivery(), dedup_header="Idempotency-Key").key == "m-1"


def test_message_id_only_claims_the_id_but_records_the_client_key() -> None:
    job = read_job(_delivery(**{"Idempotency-Key": "k-1"}), dedup_header="Idempotency-Key",
                   key_from_header=False)
    assert (job.key, job.origin_key) == ("m-1", "k-1")


def test_equal_json_is_the_same_job() -> None:
    reordered = b'{ "currency": "EUR", "amount": 100 }'
    first = read_job(_delivery(), dedup_header="Idempotency-Key")
    assert read_job(_delivery(reordered), dedup_header="Idempotency-Key").fingerprint == \
        first.fingerprint


@pytest.mark.parametrize(("delivery", "says"), [
    (_delivery(message_id=None), "no Idempotency-Key header and no message id"),
    (_delivery(**{"Idempotency-Key": "x" * 256}), "longer than 255"),
    (_delivery(**{"Idempotency-Key": 7}), "must be a string"),
    (_delivery(b"not json", **{"Idempotency-Key": "k"}), "not a valid charge"),
    (_delivery(b'{"amount": 0, "currency": "EUR"}'), "amount must be"),
    (_delivery(**{"Idempotency-Key": "k-1", "idempotency-key": "k-2"}), "header twice"),
    (_delivery(b'{"amount": 1, "amount": 5000, "currency": "EUR"}', **{"Idempotency-Key": "k"}),
     "appears more than once"),
])
def test_poison_says_why(delivery: Delivery, says: str) -> None:
    with pytest.raises(Poison) as caught:
        read_job(delivery, dedup_header="Idempotency-Key")
    assert says in str(caught.value)


def test_a_poison_body_keeps_its_key_for_the_events() -> None:
    with pytest.raises(Poison) as caught:
        read_job(_delivery(b"[]", **{"Idempotency-Key": "k-9"}), dedup_header="Idempotency-Key")
    assert caught.value.key == "k-9"


def test_test_headers_count_only_with_test_faults() -> None:
    delivery = _delivery(**{"X-Test-Pause": "before-ack:250", "X-Test-Fault": "handler-error"})
    plain = read_job(delivery, dedup_header="Idempotency-Key")
    assert plain.pause is None and not plain.fail
    job = read_job(delivery, dedup_header="Idempotency-Key", test_faults=True)
    assert job.pause is not None and job.pause.point is PausePoint.BEFORE_ACK
    assert job.pause.seconds == 0.25 and job.fail
    with pytest.raises(Poison, match="before-work:MS or before-ack:MS"):
        read_job(_delivery(**{"X-Test-Pause": "later"}), dedup_header="Idempotency-Key",
                 test_faults=True)


def test_the_event_feed_pages_by_cursor_and_waits() -> None:
    async def run() -> None:
        log = EventLog(echo=False)
        for number in range(3):
            log.record("deliver", key=f"k{number}", reason=None)
        assert [e["index"] for e in log.since(1)] == [1, 2]
        assert "reason" not in log.since(0)[0]
        assert log.since(3) == []
        waiting = asyncio.create_task(log.wait_since(3, 5.0))
        await asyncio.sleep(0)
        log.record("ack", key="k0")
        assert [e["type"] for e in await waiting] == ["ack"]
        assert await log.wait_since(9, 0.01) == []

    asyncio.run(run())

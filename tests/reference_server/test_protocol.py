"""The protocol, end to end against a live server on each store: keys, fingerprints, replays,
reuse, in-flight retries, tenants, retention and bad input."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.reference_server.conftest import Servers
from tests.reference_server.support import (
    CHARGE,
    Server,
    concurrently,
    first_answers,
    in_thread,
    new_key,
    new_tenant,
    raw_exchange,
    wait_until,
)

RETENTION = 86400.0


@pytest.fixture(scope="module")
def server(servers: Servers, store_kind: str) -> Server:
    return servers.start(["--test-clock", "--test-faults"], store=servers.store(store_kind))


# -- the service and a first request ------------------------------------------------------


def test_first_request_creates_one_charge(server: Server) -> None:
    key, tenant = new_key(), new_tenant()
    response = server.post(key, tenant=tenant)
    assert response.status_code == 201
    charge = response.json()
    assert charge["id"].startswith("ch_")
    assert {k: charge[k] for k in CHARGE} == CHARGE
    assert charge["created_at"]
    assert response.headers["location"] == f"/charges/{charge['id']}"
    assert response.headers["content-type"] == "application/json"
    assert "idempotent-replayed" not in response.headers
    assert server.effects(key, tenant=tenant) == [charge["id"]]
    read = server.request("GET", f"/charges/{charge['id']}",
                          headers=server.headers(None, tenant=tenant))
    assert read.status_code == 200
    assert read.json() == charge


def test_any_json_string_is_a_customer_even_a_nul_character(server: Server) -> None:
    """PostgreSQL's text cannot hold NUL: a customer with "\\u0000" failed the write with 500,
    first request or reuse (explore, the correct server on PostgreSQL, seed 3409260743)."""
    key, tenant = new_key(), new_tenant()
    body = {**CHARGE, "customer": "\x00k\x11Ù"}
    first = server.post(key, body, tenant=tenant)
    assert first.status_code == 201 and first.json()["customer"] == body["customer"]
    read = server.request("GET", f"/charges/{first.json()['id']}",
                          headers=server.headers(None, tenant=tenant))
    assert read.json() == first.json()
    assert server.post(key, body, tenant=tenant).json() == first.json()
    reuse = server.post(key, {**body, "customer": "\x00other"}, tenant=tenant)
    assert reuse.status_code == 422


def test_unknown_charge_and_unknown_path_are_404(server: Server) -> None:
    missing = server.request("GET", "/charges/ch_nothing")
    assert missing.status_code == 404
    assert missing.json() == {"error": "not_found"}
    assert server.request("GET", "/nowhere").status_code == 404


def test_a_charge_is_visible_to_its_own_tenant_only(server: Server) -> None:
    owner = new_tenant()
    charge = server.post(new_key(), tenant=owner).json()
    other = server.request("GET", f"/charges/{charge['id']}",
                           headers=server.headers(None, tenant=new_tenant()))
    assert other.status_code == 404


# -- replay -------------------------------------------------------------------------------


def test_retry_replays_status_body_and_headers(server: Server) -> None:
    key, tenant = new_key(), new_tenant()
    first = server.post(key, tenant=tenant)
    retry = server.post(key, tenant=tenant)
    assert retry.status_code == 201
    assert retry.content == first.content
    assert retry.headers["location"] == first.headers["location"]
    assert retry.headers["content-type"] == first.headers["content-type"]
    assert retry.headers["idempotent-replayed"] == "true"
    assert len(server.effects(key, tenant=tenant)) == 1


def test_bare_token_and_sf_string_spell_one_key(server: Server) -> None:
    key = new_key()
    first = server.post(None, headers={"Idempotency-Key": key})
    retry = server.post(None, headers={"Idempotency-Key": f'"{key}"'})
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["id"] == first.json()["id"]
    assert len(server.effects(key)) == 1


def test_an_equal_json_body_is_the_same_request(server: Server) -> None:
    key = new_key()
    first = server.post(key, content=b'{"amount":1250,"currency":"EUR","customer":"cus_42"}')
    reordered = b'{ "customer" : "cus_42",\n "currency": "EUR", "amount": 1250.0 }'
    retry = server.post(key, content=reordered)
    assert retry.status_code == 201
    assert retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["id"] == first.json()["id"]


def test_a_handler_4xx_is_stored_and_replayed(server: Server) -> None:
    key = new_key()
    first = server.post(key, {"amount": -5, "currency": "EUR"})
    assert first.status_code == 400
    assert first.json()["error"] == "invalid_charge"
    assert "idempotent-replayed" not in first.headers
    retry = server.post(key, {"amount": -5, "currency": "EUR"})
    assert retry.status_code == 400
    assert retry.content == first.content
    assert retry.headers["idempotent-replayed"] == "true"
    assert server.effects(key) == []


def test_a_client_cannot_fake_a_replay(server: Server) -> None:
    key = new_key()
    response = server.post(key, headers={"Idempotent-Replayed": "true"})
    assert response.status_code == 201
    assert "idempotent-replayed" not in response.headers
    assert len(server.effects(key)) == 1


# -- reuse --------------------------------------------------------------------------------


def test_reuse_with_another_body_path_or_method_is_422(server: Server) -> None:
    key = new_key()
    first = server.post(key)
    other_body = server.post(key, {**CHARGE, "amount": 9999})
    assert other_body.status_code == 422
    assert other_body.json()["error"] == "idempotency_key_reuse"
    headers = server.headers(key)
    other_path = server.request("POST", "/charges/elsewhere", json=CHARGE, headers=headers)
    assert other_path.status_code == 422
    for method in ("PATCH", "PUT", "DELETE", "GET"):
        other_method = server.request(method, "/charges", json=CHARGE, headers=headers)
        assert other_method.status_code == 422, method
    assert server.effects(key) == [first.json()["id"]]


def test_a_read_with_an_unused_key_passes_through_unclaimed(server: Server) -> None:
    charge = server.post(new_key()).json()
    key = new_key()
    read = server.request("GET", f"/charges/{charge['id']}", headers=server.headers(key))
    assert read.status_code == 200
    assert server.post(key).status_code == 201  # the read did not use the key up


# -- in flight ----------------------------------------------------------------------------


def test_a_retry_during_the_original_gets_409_with_retry_after(server: Server) -> None:
    key, tenant = new_key(), new_tenant()
    original, slow = in_thread(
        lambda: server.post(key, tenant=tenant, headers={"X-Test-Delay-Ms": "1500"}))
    server.wait_in_progress()
    retry = server.post(key, tenant=tenant)
    original.join(timeout=15)
    assert retry.status_code == 409
    assert retry.json()["error"] == "in_progress"
    assert retry.headers["retry-after"] == "1"
    assert slow[0].status_code == 201
    assert server.post(key, tenant=tenant).json()["id"] == slow[0].json()["id"]
    assert len(server.effects(key, tenant=tenant)) == 1


def test_concurrent_same_key_requests_make_exactly_one_charge(server: Server) -> None:
    key = new_key()
    headers = {"X-Test-Delay-Ms": "300"}
    responses = concurrently(8, lambda _: server.post(key, headers=headers))
    statuses = sorted(r.status_code for r in responses)
    firsts = first_answers(responses)
    assert len(firsts) == 1, statuses
    assert set(statuses) <= {201, 409}, statuses
    winner = firsts[0].json()["id"]
    assert all(r.json()["id"] == winner for r in responses if r.status_code == 201)
    assert server.effects(key) == [winner]


# -- tenants ------------------------------------------------------------------------------


def test_the_same_key_from_two_tenants_is_two_operations(server: Server) -> None:
    key, alice, bob = new_key(), new_tenant(), new_tenant()
    for_alice = server.post(key, tenant=alice)
    for_bob = server.post(key, tenant=bob)
    assert for_alice.status_code == for_bob.status_code == 201
    assert "idempotent-replayed" not in for_bob.headers
    assert for_alice.json()["id"] != for_bob.json()["id"]
    assert server.post(key, tenant=bob).json()["id"] == for_bob.json()["id"]
    assert server.effects(key, tenant=alice) == [for_alice.json()["id"]]
    assert server.effects(key, tenant=bob) == [for_bob.json()["id"]]


def test_the_anonymous_tenant_is_a_tenant_of_its_own(server: Server) -> None:
    key = new_key()
    anonymous = server.post(key)
    named = server.post(key, tenant=new_tenant())
    assert "idempotent-replayed" not in named.headers
    assert anonymous.json()["id"] != named.json()["id"]


# -- retention ----------------------------------------------------------------------------


def test_retention_replays_inside_the_window_and_forgets_after_it(server: Server) -> None:
    key = new_key()
    first = server.post(key)
    server.advance(RETENTION - 120)
    inside = server.post(key)
    assert inside.headers.get("idempotent-replayed") == "true"
    server.advance(240)
    after = server.post(key)
    assert after.status_code == 201
    assert "idempotent-replayed" not in after.headers
    assert server.effects(key) == [first.json()["id"], after.json()["id"]]


def test_advancing_past_retention_cleans_up_expired_keys(server: Server) -> None:
    for _ in range(3):
        server.post(new_key())
    assert server.keys()["rows"] >= 3
    server.advance(RETENTION + 1)
    stats = server.keys()
    assert stats == {"rows": 0, "in_progress": 0, "oldest_created_at": None}
    server.post(new_key())
    assert server.cleanup() == 0
    assert server.keys()["rows"] == 1


# -- missing and bad keys -----------------------------------------------------------------


def test_a_missing_key_is_400_in_strict_mode(server: Server) -> None:
    tenant = new_tenant()
    response = server.post(None, tenant=tenant)
    assert response.status_code == 400
    assert response.json() == {"error": "idempotency_key_missing"}
    assert server.effects(None, tenant=tenant) == []


BAD_KEYS = {
    "empty": b"",
    "empty sf-string": b'""',
    "too long": b"k" * 256,
    "too long sf-string": b'"' + b"k" * 256 + b'"',
    "unterminated": b'"abc',
    "text after the quote": b'"abc"def',
    "parameters": b'"abc";a=1',
    "bad escape": b'"a\\bc"',
    "non-ascii": "cl\u00e9".encode(),
    "control character": b"ab\x01cd",
    "tab inside": b"ab\tcd",
}


@pytest.mark.parametrize("raw_key", BAD_KEYS.values(), ids=BAD_KEYS.keys())
def test_a_bad_key_is_rejected_and_charges_nothing(server: Server, raw_key: bytes) -> None:
    tenant = new_tenant()
    body = json.dumps(CHARGE).encode()
    status, response = raw_exchange(server.port, (
        b"POST /charges HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
        b"Content-Type: application/json\r\nAuthorization: Bearer " + tenant.encode() + b"\r\n"
        b"Idempotency-Key: " + raw_key + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    ))
    assert status == 400, response
    assert server.admin("GET", "effects/total")["total"] >= 0
    assert server.effects(None, tenant=tenant) == []
    assert server.health()["status"] == "ok"


def test_two_key_headers_are_rejected(server: Server) -> None:
    response = server.request("POST", "/charges", json=CHARGE,
                              headers=[("Idempotency-Key", "a"), ("Idempotency-Key", "b")])
    assert response.status_code == 400
    assert response.json()["error"] == "idempotency_key_invalid"


def test_a_key_of_255_characters_is_accepted(server: Server) -> None:
    key = new_key().ljust(255, "x")
    assert server.post(key).status_code == 201
    assert server.post(key).headers["idempotent-replayed"] == "true"


def test_a_bad_authorization_is_401_and_charges_nothing(server: Server) -> None:
    key = new_key()
    response = server.post(key, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_authorization"
    assert server.admin("GET", "keys")["in_progress"] == 0


# -- bad bodies ---------------------------------------------------------------------------

BAD_BODIES = {
    "not json": b"amount=5",
    "truncated": b'{"amount": 5, "curr',
    "not utf-8": b'{"amount": 5, "currency": "\xff\xfe"}',
    "NaN": b'{"amount": NaN, "currency": "EUR"}',
    "lone surrogate in a name": b'{"amount": 5, "currency": "EUR", "\\ud800": 1}',
    "nested too deeply": b"[" * 100_000 + b"]" * 100_000,
    "integer beyond I-JSON": b'{"amount": 123456789012345678901234567890, "currency": "EUR"}',
    "integer beyond Python's digit limit": b'{"amount": ' + b"7" * 5000 + b', "currency": "EUR"}',
    "empty": b"",
}


@pytest.mark.parametrize("content", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_a_body_that_is_not_json_is_400_and_never_stored(server: Server, content: bytes) -> None:
    key = new_key()
    response = server.post(key, content=content)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_json"
    assert b"7777777777" not in response.content, "a bad body is not echoed back"
    assert server.effects(key) == []
    assert server.post(key).status_code == 201  # the key was not used up


def test_a_body_over_one_mebibyte_is_413_and_never_stored(server: Server) -> None:
    key = new_key()
    big = json.dumps({**CHARGE, "customer": "x" * (1 << 20)}).encode()
    assert server.post(key, content=big).status_code == 413

    def chunks() -> Iterator[bytes]:
        for _ in range(20):
            yield b" " * 65536
        yield json.dumps(CHARGE).encode()

    with server.client() as client:
        streamed = client.post("/charges", content=chunks(), headers=server.headers(key))
    assert streamed.status_code == 413
    assert streamed.json() == {"error": "body_too_large"}
    assert server.effects(key) == []
    assert server.post(key).status_code == 201


BAD_CHARGES = {
    "amount as text": {"amount": "10", "currency": "EUR"},
    "amount zero": {"amount": 0, "currency": "EUR"},
    "fractional amount": {"amount": 1.5, "currency": "EUR"},
    "amount true": {"amount": True, "currency": "EUR"},
    "currency of four letters": {"amount": 1, "currency": "EURO"},
    "currency with a digit": {"amount": 1, "currency": "EU1"},
    "customer not text": {"amount": 1, "currency": "EUR", "customer": 7},
    "unknown field": {"amount": 1, "currency": "EUR", "refund": True},
    "not an object": [1, 2, 3],
}


@pytest.mark.parametrize("body", BAD_CHARGES.values(), ids=BAD_CHARGES.keys())
def test_an_invalid_charge_is_400_and_charges_nothing(server: Server, body: object) -> None:
    key = new_key()
    response = server.post(key, body)
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_charge"
    assert server.effects(key) == []


def test_the_server_keeps_serving_after_hostile_requests(server: Server) -> None:
    garbage = [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,  # a TLS hello
        b"POST /charges HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n",
        b"POST /charges HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"POST /charges HTTP/1.1\r\n" + b"X-Long: " + b"a" * 70_000 + b"\r\n\r\n",
    ]
    for request in garbage:
        try:
            status, _ = raw_exchange(server.port, request)
        except (ConnectionError, IndexError, ValueError):
            continue  # the server may simply hang up on bytes that are not HTTP
        assert 400 <= status < 500
    wait_until(lambda: server.health()["status"] == "ok", "the server to answer")
    assert server.post(new_key()).status_code == 201

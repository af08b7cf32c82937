"""The pure pieces, without a server: key spelling, fingerprints, the claim verdicts, durations,
store URLs and the flaw registry."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import rfc8785
from hypothesis import example, given
from hypothesis import strategies as st

from reference_server._claims import ClaimRequest, Verdict, judge
from reference_server._durations import parse_duration
from reference_server._fingerprint import InvalidJson, canonical_json, fingerprint
from reference_server._keys import InvalidKey, parse_key
from reference_server._model import KeyRecord, StoredResponse
from reference_server.flaws import FLAWS, UnknownFlaw, get_flaw
from reference_server.stores import StoreUnavailable, StoreUrlError, check_store_url, sqlite_path
from reference_server.stores._group_commit import GroupCommit

NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("raw", "key"), [
    (b"abc", "abc"),
    (b'"abc"', "abc"),
    (b'  "abc"  ', "abc"),
    (b'"a\\"b\\\\c"', 'a"b\\c'),
    (b"8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
    (b'"with space"', "with space"),
])
def test_keys_spelled_either_way(raw: bytes, key: str) -> None:
    assert parse_key([raw]) == key


_ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.text(max_size=6) | _ANY_TEXT
    | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=4) | _ANY_TEXT, inner, max_size=4),
    max_leaves=12)


@given(_JSON)
@example({"\ufb01": 1, "\U0001f600": 2})  # code-point order is not UTF-16 order here
@example([1.0, 1e16, 2**53, -0.0])  # spelled otherwise by json, or refused by RFC 8785
@example({"\ud800": None})  # rfc8785 refuses a lone surrogate in a name with another error
def test_canonical_json_is_rfc8785_on_either_road(document: object) -> None:
    """The standard library's encoder is taken only where it writes what RFC 8785 writes:
    the same bytes, or the same refusal, for any document (floats, huge integers, keys and
    strings with any code point, lone surrogates included)."""
    body = json.dumps(document, ensure_ascii=True).encode()
    try:
        expected: bytes | None = rfc8785.dumps(json.loads(body))
    except (rfc8785.CanonicalizationError, UnicodeEncodeError):
        expected = None
    if expected is None:
        with pytest.raises(InvalidJson):
            canonical_json(body)
    else:
        assert canonical_json(body) == expected


def test_a_key_that_is_not_one() -> None:
    with pytest.raises(InvalidKey, match="exactly one"):
        parse_key([b"a", b"b"])
    with pytest.raises(InvalidKey, match="closing quote"):
        parse_key([b'"abc'])


def test_fingerprints_ignore_json_spelling_and_nothing_else() -> None:
    one = canonical_json(b'{"b": [1, 2.0, "x"], "a": 1}')
    same = canonical_json(b'{"a":1,"b":[1,2,"x"]}')
    assert one == same
    assert fingerprint("POST", "/charges", one) == fingerprint("POST", "/charges", same)
    assert fingerprint("POST", "/charges", one) != fingerprint("PATCH", "/charges", one)
    assert fingerprint("POST", "/charges", one) != fingerprint("POST", "/charge", one)
    assert fingerprint("POST", "/a", b"b/c") != fingerprint("POST", "/ab", b"/c")
    with pytest.raises(InvalidJson):
        canonical_json(b'{"a": Infinity}')


def _request(**changes: object) -> ClaimRequest:
    values: dict[str, object] = {
        "tenant": "t", "key": "k", "fingerprint": "f", "now": NOW,
        "lease": timedelta(seconds=30), "retention": timedelta(hours=24),
    }
    values.update(changes)
    return ClaimRequest(**values)  # type: ignore[arg-type]


def _record(*, done: bool = False, fingerprint: str = "f", age: float = 1,
            lease_left: float = 10) -> KeyRecord:
    return KeyRecord(
        fingerprint=fingerprint,
        token=7,
        response=StoredResponse(201, (), b"{}") if done else None,
        locked_until=None if done else NOW + timedelta(seconds=lease_left),
        created_at=NOW - timedelta(seconds=age),
    )


@pytest.mark.parametrize(("record", "request_", "verdict"), [
    (None, _request(), Verdict.NEW),
    (_record(done=True, age=86400), _request(), Verdict.NEW),
    (_record(done=True), _request(), Verdict.REPLAY),
    (_record(done=True, fingerprint="other"), _request(), Verdict.REUSE),
    (_record(fingerprint="other", lease_left=-1), _request(), Verdict.REUSE),
    (_record(), _request(), Verdict.IN_PROGRESS),
    (_record(lease_left=0), _request(), Verdict.TAKE_OVER),
    (_record(lease_left=-1), _request(lease_recovery=False), Verdict.IN_PROGRESS),
])
def test_claim_verdicts(record: KeyRecord | None, request_: ClaimRequest,
                        verdict: Verdict) -> None:
    assert judge(record, request_) is verdict


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 30), ("30s", 30), ("1.5s", 1.5), ("250ms", 0.25), ("5m", 300), ("24h", 86400),
    ("2d", 172800), (".5s", 0.5),
])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5x", "-1s", "0", "1h30m", "s"])
def test_bad_durations_name_the_accepted_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"30s|longer than zero"):
        parse_duration(text)


def test_store_urls(tmp_path: Path) -> None:
    assert check_store_url(f"sqlite:///{tmp_path}/x.sqlite3") == "sqlite"
    assert check_store_url(f"sqlite:////{tmp_path}/x.sqlite3") == "sqlite"
    assert check_store_url("postgresql://u@127.0.0.1:5432/db") == "postgresql"
    assert check_store_url("host=127.0.0.1 port=5432 dbname=db user=u") == "postgresql"
    assert sqlite_path(f"sqlite:///{tmp_path}/x.sqlite3") == tmp_path / "x.sqlite3"


@pytest.mark.parametrize("url", [
    "mysql://x/y", "keys.sqlite3", "sqlite://relative/x", "sqlite:///no/such/dir/x", "",
])
def test_bad_store_urls(url: str) -> None:
    with pytest.raises(StoreUrlError):
        check_store_url(url)


def test_the_flaw_registry() -> None:
    assert set(FLAWS) == {
        "server-generated-key", "no-body-hash", "key-only", "short-ttl", "no-cleanup",
        "check-then-insert", "insert-after-work", "stuck-after-crash", "split-commit",
        "no-tenant-scope", "no-fencing", "ack-before-commit",
    }
    switched: set[str] = set()
    for flaw in FLAWS.values():
        assert flaw.properties and all(re.fullmatch(r"P([1-9]|1[01])", p) for p in flaw.properties)
        assert flaw.summary and "Breaks:" in flaw.doc and "See it:" in flaw.doc
        assert len(flaw.switch) == 1  # one switch per flaw
        switched |= set(flaw.switch)
    assert len(switched) >= 11  # and no two flaws are the same switch, bar the claim style
    with pytest.raises(UnknownFlaw, match="choose one of: server-generated-key"):
        get_flaw("no-such-flaw")


def test_group_commit_isolates_a_failing_operation_and_fails_all_on_a_database_error(
    tmp_path: Path,
) -> None:
    db = sqlite3.connect(tmp_path / "g.sqlite3", isolation_level=None)
    db.execute("CREATE TABLE t (x INTEGER)")
    writes = GroupCommit(lambda: db, name="test")

    def insert(value: int) -> Callable[[sqlite3.Connection], int]:
        def operation(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT INTO t VALUES (?)", (value,))
            if value == 2:
                raise ValueError("this one fails")
            return value
        return operation

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO no_such_table VALUES (1)")

    async def one_turn() -> tuple[object, ...]:
        return await asyncio.gather(writes.run(insert(1)), writes.run(insert(2)),
                                    writes.run(insert(3)), return_exceptions=True)

    first, failed, third = asyncio.run(one_turn())
    assert (first, third) == (1, 3)
    assert isinstance(failed, ValueError)
    assert sorted(row[0] for row in db.execute("SELECT x FROM t")) == [1, 3]

    async def poisoned_turn() -> tuple[object, ...]:
        return await asyncio.gather(writes.run(insert(4)), writes.run(broken),
                                    return_exceptions=True)

    assert all(isinstance(r, StoreUnavailable) for r in asyncio.run(poisoned_turn()))
    assert sorted(row[0] for row in db.execute("SELECT x FROM t")) == [1, 3]


@pytest.mark.parametrize(("seconds", "spelled"), [
    (0.25, "250ms"), (4.2, "4.2s"), (30, "30s"), (74.88, "1m 15s"), (75, "1m 15s"),
    (300, "5m"), (86400, "24h"), (86460, "24h 1m"), (259200, "3d"), (3 * 86400 + 7200, "3d 2h"),
])
def test_durations_read_the_way_people_say_them(seconds: float, spelled: str) -> None:
    from harness._durations import format_duration

    assert format_duration(seconds) == spelled

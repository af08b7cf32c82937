"""Side-effect oracles: how many times did the target really charge for this (tenant, key)?

The count comes from outside the idempotency layer (the ledger, a database query, the recorder),
because the layer's own bookkeeping is exactly what is under suspicion.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urljoin

import httpx
import psycopg

from harness._errors import ServiceError
from harness._history import ORACLE, Event, History
from harness._target import HttpEffects, SqlEffects, placeholders, render_template
from harness.judging._analysis import Identity
from harness.services._network import require_loopback
from harness.services._recorder import Recorder

__all__ = [
    "EffectCount",
    "EffectOracle",
    "HttpOracle",
    "NotCountable",
    "RecorderOracle",
    "SqlOracle",
    "answered_without_a_charge",
    "identities_sent",
    "last_counts",
    "other_spellings",
    "record_effects",
    "record_total",
    "sql_count",
    "sql_rows",
]


@dataclass(frozen=True, slots=True)
class EffectCount:
    count: int
    ids: tuple[str, ...] | None = None


class NotCountable(Exception):
    """The target file gives no way to count what was asked: the judge must say "unknown"."""


class EffectOracle(Protocol):
    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        """Side effects for requests of ``tenant`` carrying ``key``.  ``key=None`` asks for the
        charges made without a key, and raises ``NotCountable`` unless the target file says how
        to count those alone."""
        ...

    def total(self) -> int:
        """Every charge the target made, for ``[effects.keyless] how = "total"``; raises
        ``NotCountable`` when the file declares no total."""
        ...

    def close(self) -> None: ...


def _checked_count(value: Any) -> int:
    """A count is a non-negative integer; anything else is the oracle's error, not evidence."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"the count {value!r} is not an integer")
    count = int(value)
    if count < 0:
        raise ValueError(f"the count {count} is negative")
    return count


def _dig(data: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(data, Mapping) or part not in data:
            raise KeyError(path)
        data = data[part]
    return data


class HttpOracle:
    """Asks the target directly (not through the proxy, so faults never blind the oracle)."""

    def __init__(self, spec: HttpEffects, *, base_url: str, allow_remote: bool = False) -> None:
        self._spec = spec
        self._base_url = base_url
        self._allow_remote = allow_remote
        self._url = self._absolute(spec.url)
        keyless = spec.keyless
        self._keyless_url = self._absolute(keyless.url) if keyless and keyless.url else self._url
        self._http = httpx.Client(timeout=10.0)

    def _absolute(self, url: str) -> str:
        """``url`` relative to the target, checked once: loopback unless allowed."""
        absolute = url if url.startswith(("http://", "https://")) else urljoin(
            self._base_url.rstrip("/") + "/", url.lstrip("/"))
        require_loopback(absolute, allow_remote=self._allow_remote)
        return absolute

    def _ask(self, url: str, query: Mapping[str, str], count_path: str, ids_path: str | None,
             values: Mapping[str, str | None]) -> EffectCount:
        params = {
            name: str(render_template(template, values))
            for name, template in query.items()
            if all(values.get(p) is not None for p in placeholders(template))
        }
        try:
            response = self._http.get(url, params=params)
            response.raise_for_status()
            data = response.json()
            count = _checked_count(_dig(data, count_path))
            ids = _dig(data, ids_path) if ids_path else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ServiceError(
                f"the effects query {url} {params} failed: {exc}; check [effects] url, query and "
                "count in the target file"
            ) from exc
        return EffectCount(count, tuple(str(i) for i in ids) if isinstance(ids, list) else None)

    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        spec = self._spec
        if key is not None:
            return self._ask(self._url, spec.query, spec.count, spec.ids,
                             {"tenant": tenant, "key": key})
        keyless = spec.keyless
        if keyless is None or keyless.how != "query":
            raise NotCountable("the target file gives no query that counts charges made "
                               "without a key ([effects.keyless] how = \"query\")")
        return self._ask(self._keyless_url, keyless.query, keyless.count or spec.count, None,
                         {"tenant": tenant})

    def total(self) -> int:
        keyless = self._spec.keyless
        if keyless is None or keyless.how != "total":
            raise NotCountable("the target file declares no total ([effects.keyless] "
                               "how = \"total\")")
        return self._ask(self._keyless_url, keyless.query, keyless.count or self._spec.count,
                         None, {}).count

    def close(self) -> None:
        self._http.close()


class SqlOracle:
    """Runs the target file's query over its DSN (PostgreSQL or SQLite) with the key bound."""

    def __init__(self, spec: SqlEffects, *, allow_remote: bool = False) -> None:
        self._spec = spec
        if spec.dsn.startswith("postgres"):
            require_loopback(spec.dsn, allow_remote=allow_remote)

    def _rows(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        return sql_rows(self._spec.dsn, query, params)

    def _count(self, query: str, params: dict[str, Any]) -> int:
        return sql_count(self._spec.dsn, query, params, where="[effects] dsn and query")

    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        params = {"tenant": tenant, "key": key}
        if key is None:
            keyless = self._spec.keyless
            if keyless is None or keyless.how != "query":
                raise NotCountable("the target file gives no query that counts charges made "
                                   "without a key ([effects.keyless] how = \"query\")")
            return EffectCount(self._count(keyless.query, params))
        count = self._count(self._spec.query, params)
        ids = None
        if self._spec.ids_query:
            try:
                ids = tuple(str(r[0]) for r in self._rows(self._spec.ids_query, params))
            except (sqlite3.Error, psycopg.Error) as exc:
                raise ServiceError(f"the ids query failed for {params}: {exc}; check "
                                   "[effects] ids_query in the target file") from exc
        return EffectCount(count, ids)

    def total(self) -> int:
        keyless = self._spec.keyless
        if keyless is None or keyless.how != "total":
            raise NotCountable("the target file declares no total ([effects.keyless] "
                               "how = \"total\")")
        return self._count(keyless.query, {"tenant": None, "key": None})

    def close(self) -> None:
        pass


def sql_rows(dsn: str, query: str, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """The rows ``query`` answers over ``dsn`` (PostgreSQL, or SQLite with ``%(name)s``
    parameters rewritten to its ``:name``)."""
    if dsn.startswith("sqlite:///"):
        named = query.replace("%(tenant)s", ":tenant").replace("%(key)s", ":key")
        with sqlite3.connect(dsn.removeprefix("sqlite:///"), timeout=10) as conn:
            return conn.execute(named, dict(params)).fetchall()
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        return conn.execute(query, dict(params)).fetchall()


def sql_count(dsn: str, query: str, params: Mapping[str, Any], *, where: str) -> int:
    """The count in the first column of ``query``'s first row; a failure names ``where`` in
    the target file to check."""
    try:
        rows = sql_rows(dsn, query, params)
        return _checked_count(rows[0][0]) if rows else 0
    except (sqlite3.Error, psycopg.Error, ValueError, IndexError) as exc:
        raise ServiceError(f"the query failed for {dict(params)}: {exc}; check {where} in the "
                           "target file") from exc


class RecorderOracle:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        effects = self.recorder.effects(tenant, key)
        if key is not None and not key.isascii():
            # Servers that read header bytes as ISO-8859-1 (WSGI, Node) report a UTF-8 key in
            # that spelling: the same key, which the count must not miss.
            effects += self.recorder.effects(tenant, key.encode().decode("latin-1"))
        ids = tuple(e.id for e in effects if e.id is not None)
        return EffectCount(len(effects), ids if len(ids) == len(effects) else None)

    def total(self) -> int:
        return self.recorder.total()

    def close(self) -> None:
        self.recorder.close()


def record_effects(history: History, oracle: EffectOracle, tenant: str | None,
                   key: str | None) -> Event:
    """Ask ``oracle`` about one (tenant, key) and record the answer as an ``effects`` event
    (returned).

    The oracle's failure is evidence too: it is recorded as a ``fail`` event, which makes the
    verdict for that key "unknown" rather than a guess.
    """
    try:
        counted = oracle.count(tenant, key)
        asked = key
        for spelled in other_spellings(key):
            if counted.count:
                break
            counted, asked = oracle.count(tenant, spelled), spelled
    except NotCountable as exc:
        return history.record("info", "effects", ORACLE, tenant=tenant, key=key, error=str(exc))
    except Exception as exc:
        return history.record("fail", "effects", ORACLE, tenant=tenant, key=key, error=str(exc))
    value: dict[str, Any] = {"count": counted.count}
    if counted.ids is not None:
        value["ids"] = list(counted.ids)
    if asked != key and counted.count:
        value["asked_as"] = asked  # the server holds the key under this spelling
    return history.record("ok", "effects", ORACLE, tenant=tenant, key=key, value=value)


def other_spellings(key: str | None) -> list[str]:
    """The spellings a server may hold a key under, other than the one sent, each tried in
    turn when none are counted under the sent one: the one a server that decodes header bytes
    as latin-1 (WSGI by PEP 3333, Starlette, Node) gives a key sent as UTF-8 (``clé`` arrives
    as ``clÃ©``), and the key without the whitespace around it, which HTTP strips from a
    header value (RFC 9110 section 5.5) and some servers do not."""
    if key is None:
        return []
    spellings = [] if key.isascii() else [key.encode("utf-8").decode("latin-1")]
    if key != key.strip(" \t"):
        spellings.append(key.strip(" \t"))
    return spellings


def record_total(history: History, oracle: EffectOracle) -> None:
    """Record every charge the target made so far as an ``effects-total`` event: around a
    keyless request sent alone, two of them measure what that request charged."""
    try:
        total = oracle.total()
    except NotCountable as exc:
        history.record("info", "effects-total", ORACLE, error=str(exc))
        return
    except Exception as exc:
        history.record("fail", "effects-total", ORACLE, error=str(exc))
        return
    history.record("ok", "effects-total", ORACLE, value={"total": total})


def identities_sent(events: Sequence[Event]) -> list[tuple[str | None, str | None]]:
    """Every (tenant, key) a request was sent with, in first-use order: whom to ask."""
    seen: dict[tuple[str | None, str | None], None] = {}
    for event in events:
        if event.f == "request" and event.type == "invoke":
            seen.setdefault(event.identity, None)
    return list(seen)


def last_counts(events: Sequence[Event]) -> dict[Identity, tuple[int, int]]:
    """Each key's last charge count the oracle gave: the event's index, and the count."""
    return {(e.tenant, e.key): (e.index, int(e.value.get("count", 0)))
            for e in events if e.f == "effects" and e.type == "ok"}


def answered_without_a_charge(events: Sequence[Event],
                              counts: Mapping[Identity, tuple[int, int]]) -> list[Identity]:
    """The keys whose last count (``counts``), taken after a 2xx answer, found nothing: a
    service that answers before its charge shows (it commits after answering, or the effects
    are read from a replica that lags) is looked at again before the count is judged."""
    answered = {e.identity: e.index for e in events
                if e.f == "request" and e.type == "ok" and e.status is not None
                and 200 <= e.status < 300}
    return [identity for identity, answer in answered.items()
            if identity in counts and counts[identity][0] > answer and counts[identity][1] == 0]


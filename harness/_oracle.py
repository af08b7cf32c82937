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
from harness._network import require_loopback
from harness._recorder import Recorder
from harness._target import HttpEffects, SqlEffects, placeholders, render_template

__all__ = ["EffectCount", "EffectOracle", "HttpOracle", "RecorderOracle", "SqlOracle"]


@dataclass(frozen=True, slots=True)
class EffectCount:
    count: int
    ids: tuple[str, ...] | None = None


class EffectOracle(Protocol):
    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        """Side effects for requests of ``tenant`` carrying ``key`` (None: sent without a key)."""
        ...

    def close(self) -> None: ...


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
        self._url = urljoin(base_url.rstrip("/") + "/", spec.url.lstrip("/"))
        if spec.url.startswith(("http://", "https://")):
            self._url = spec.url
        require_loopback(self._url, allow_remote=allow_remote)
        self._http = httpx.Client(timeout=10.0)

    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        values = {"tenant": tenant, "key": key}
        # A parameter whose placeholder has no value is left out: no key means "sent without one".
        params = {
            name: str(render_template(template, values))
            for name, template in self._spec.query.items()
            if all(values.get(p) is not None for p in placeholders(template))
        }
        try:
            response = self._http.get(self._url, params=params)
            response.raise_for_status()
            data = response.json()
            count = int(_dig(data, self._spec.count))
            ids = _dig(data, self._spec.ids) if self._spec.ids else None
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
            raise ServiceError(
                f"the effects query {self._url} failed for tenant={tenant!r} key={key!r}: {exc}; "
                "check [effects] url, query and count in the target file"
            ) from exc
        return EffectCount(count, tuple(str(i) for i in ids) if isinstance(ids, list) else None)

    def close(self) -> None:
        self._http.close()


class SqlOracle:
    """Runs the target file's query over its DSN (PostgreSQL or SQLite) with the key bound."""

    def __init__(self, spec: SqlEffects, *, allow_remote: bool = False) -> None:
        self._spec = spec
        if spec.dsn.startswith("postgres"):
            require_loopback(spec.dsn, allow_remote=allow_remote)

    def _rows(self, query: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        if self._spec.dsn.startswith("sqlite:///"):
            named = query.replace("%(tenant)s", ":tenant").replace("%(key)s", ":key")
            with sqlite3.connect(self._spec.dsn.removeprefix("sqlite:///"), timeout=10) as conn:
                return conn.execute(named, params).fetchall()
        with psycopg.connect(self._spec.dsn, connect_timeout=10) as conn:
            return conn.execute(query, params).fetchall()

    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        params = {"tenant": tenant, "key": key}
        try:
            rows = self._rows(self._spec.query, params)
            count = int(rows[0][0]) if rows else 0
            ids = None
            if self._spec.ids_query:
                ids = tuple(str(r[0]) for r in self._rows(self._spec.ids_query, params))
        except (sqlite3.Error, psycopg.Error, ValueError, IndexError) as exc:
            raise ServiceError(
                f"the effects query failed for tenant={tenant!r} key={key!r}: {exc}; "
                "check [effects] dsn and query in the target file"
            ) from exc
        return EffectCount(count, ids)

    def close(self) -> None:
        pass


class RecorderOracle:
    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        effects = self.recorder.effects(tenant, key)
        ids = tuple(e.id for e in effects if e.id is not None)
        return EffectCount(len(effects), ids if len(ids) == len(effects) else None)

    def close(self) -> None:
        self.recorder.close()


def record_effects(history: History, oracle: EffectOracle, tenant: str | None,
                   key: str | None) -> None:
    """Ask ``oracle`` about one (tenant, key) and record the answer as an ``effects`` event.

    The oracle's failure is evidence too: it is recorded as a ``fail`` event, which makes the
    verdict for that key "unknown" rather than a guess.
    """
    try:
        counted = oracle.count(tenant, key)
    except Exception as exc:
        history.record("fail", "effects", ORACLE, tenant=tenant, key=key, error=str(exc))
        return
    value: dict[str, Any] = {"count": counted.count}
    if counted.ids is not None:
        value["ids"] = list(counted.ids)
    history.record("ok", "effects", ORACLE, tenant=tenant, key=key, value=value)


def identities_sent(events: Sequence[Event]) -> list[tuple[str | None, str | None]]:
    """Every (tenant, key) a request was sent with, in first-use order: whom to ask."""
    seen: dict[tuple[str | None, str | None], None] = {}
    for event in events:
        if event.f == "request" and event.type == "invoke":
            seen.setdefault(event.identity, None)
    return list(seen)

"""A target's key table: its size (from an HTTP route, a SQL count or a Redis command), and
its cleanup (``[hooks.cleanup]``), each done the way the target file says.

P11 (bounded storage) needs the number of rows, and the scenarios time a retry better when the
target can say how many keys are in progress.  Most services whose keys live in a database or
in Redis have no statistics route, so the count can also come from the store itself, over the
same kind of connection the SQL oracle uses, or from Redis (the keys matching a pattern, or
``DBSIZE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis

from harness._clock import HookCall
from harness._errors import ServiceError, UsageError
from harness._target import SqlEffects, StoreSizeHook, Target, render_template
from harness.evidence._oracle import sql_count
from harness.services._network import require_loopback

__all__ = ["read_store_size", "run_cleanup"]

#: Keys counted per SCAN call: the store is a test's, so a few thousand keys at most.
_SCAN_BATCH = 1000


def read_store_size(target: Target, call: HookCall, values: Mapping[str, Any], *,
                    allow_remote: bool = False) -> dict[str, int]:
    """Rows in the key table (``rows``) and, when the hook can tell, keys in progress
    (``in_progress``); ``values`` fill the placeholders of a DSN or Redis URL
    (``{workdir}``, ``{store_port}``)."""
    hook = target.hooks.store_size
    if hook is None:
        raise UsageError(f"target {target.name} has no store_size hook")
    if hook.path is not None:
        data = call(hook.method, hook.path, None, {})
        size = {"rows": int(data[hook.rows])}
        if hook.in_progress:
            size["in_progress"] = int(data[hook.in_progress])
        return size
    if hook.sql is not None:
        return _by_sql(hook, hook.sql, _dsn(target, hook, values), allow_remote)
    return _by_redis(hook, str(render_template(hook.redis, values)), target, allow_remote)


def _dsn(target: Target, hook: StoreSizeHook, values: Mapping[str, Any]) -> str:
    dsn = hook.dsn or (target.effects.dsn if isinstance(target.effects, SqlEffects) else None)
    if dsn is None:
        raise UsageError(f"[hooks.store_size] sql needs a database: give dsn, or count effects "
                         f"with SQL ([effects] kind = \"sql\") in {target.source}")
    return str(render_template(dsn, values))


def _by_sql(hook: StoreSizeHook, query: str, dsn: str, allow_remote: bool) -> dict[str, int]:
    if dsn.startswith("postgres"):
        require_loopback(dsn, allow_remote=allow_remote)
    where = "[hooks.store_size] sql"
    size = {"rows": sql_count(dsn, query, {}, where=where)}
    if hook.in_progress_sql:
        size["in_progress"] = sql_count(dsn, hook.in_progress_sql, {},
                                        where="[hooks.store_size] in_progress_sql")
    return size


def _by_redis(hook: StoreSizeHook, url: str, target: Target,
              allow_remote: bool) -> dict[str, int]:
    if url.startswith("redis://"):
        require_loopback(url, allow_remote=allow_remote)
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    try:
        size = {"rows": _matching(client, hook.pattern)}
        if hook.in_progress_pattern:
            size["in_progress"] = _matching(client, hook.in_progress_pattern)
        return size
    except redis.RedisError as exc:
        raise ServiceError(f"counting keys in Redis at {url} failed: {exc}; check "
                           f"[hooks.store_size] redis in {target.source}") from exc
    finally:
        client.close()


def _matching(client: redis.Redis, pattern: str | None) -> int:
    """Keys matching ``pattern`` (SCAN, never KEYS, which blocks the server), or every key."""
    if pattern is None:
        return int(client.dbsize())
    return sum(1 for _ in client.scan_iter(match=pattern, count=_SCAN_BATCH))


def run_cleanup(target: Target, call: HookCall) -> None:
    """Ask the target to delete its expired keys now, through ``[hooks.cleanup]``."""
    hook = target.hooks.cleanup
    if hook is None:
        raise UsageError(f"target {target.name} has no cleanup hook")
    call(hook.method, hook.path, None, {})

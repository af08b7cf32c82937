"""The oracle's evidence for thousands of keys: one ``effects`` event per (tenant, key).

A load run leaves far more keys than a scenario, and the oracle answers one key per question, so
the questions go out from a pool of threads, and for an HTTP oracle with a relative URL they are
spread over every instance of the target (each asked directly, never through its proxy).  As in
``ScenarioContext.collect_effects``, an oracle that cannot answer is recorded as a ``fail`` event,
which makes the verdict for that key ``unknown`` rather than a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness._analysis import Identity
from harness._deployment import Deployment
from harness._history import ORACLE, Event, History
from harness._oracle import EffectOracle, HttpOracle
from harness._target import HttpEffects

__all__ = ["collect_effects", "identities"]

THREADS = 16


def identities(events: Sequence[Event]) -> list[Identity]:
    """Every (tenant, key) a request was sent with, in first-use order."""
    seen: dict[Identity, None] = {}
    for event in events:
        if event.f == "request" and event.type == "invoke":
            seen.setdefault(event.identity, None)
    return list(seen)


def collect_effects(history: History, deployment: Deployment, *, threads: int = THREADS) -> int:
    """Record the effects of every identity in ``history``; return how many were asked about."""
    wanted = identities(history.events())
    oracles, extra = _oracles(deployment)
    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="oracle") as pool:
            for position, (tenant, key) in enumerate(wanted):
                pool.submit(_record, history, oracles[position % len(oracles)], tenant, key)
    finally:
        for oracle in extra:
            oracle.close()
    return len(wanted)


def _oracles(deployment: Deployment) -> tuple[list[EffectOracle], list[EffectOracle]]:
    """The oracles to ask, and the ones made here (to be closed here)."""
    main = deployment.oracle
    assert main is not None
    effects = deployment.target.effects
    if not isinstance(effects, HttpEffects) or effects.url.startswith(("http://", "https://")):
        return [main], []
    extra: list[EffectOracle] = [
        HttpOracle(effects, base_url=instance.direct_url, allow_remote=deployment.allow_remote)
        for instance in deployment.instances[1:]
    ]
    return [main, *extra], extra


def _record(history: History, oracle: EffectOracle, tenant: str | None, key: str | None) -> None:
    try:
        counted = oracle.count(tenant, key)
    except Exception as exc:  # the oracle's failure is evidence too: it makes "unknown"
        history.record("fail", "effects", ORACLE, tenant=tenant, key=key, error=str(exc))
        return
    value: dict[str, Any] = {"count": counted.count}
    if counted.ids is not None:
        value["ids"] = list(counted.ids)
    history.record("ok", "effects", ORACLE, tenant=tenant, key=key, value=value)

"""The oracle's evidence for thousands of keys: one ``effects`` event per (tenant, key).

A load run leaves far more keys than a scenario, and the oracle answers one key per question, so
the questions go out from a pool of threads, and for an HTTP oracle with a relative URL they are
spread over every instance of the target (each asked directly, never through its proxy).  Each
answer is recorded as ``ScenarioContext.collect_effects`` records it (``record_effects``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from harness._history import History
from harness._target import HttpEffects
from harness.evidence._oracle import EffectOracle, HttpOracle, identities_sent, record_effects
from harness.http._deployment import Deployment

__all__ = ["collect_effects"]

THREADS = 16


def collect_effects(history: History, deployment: Deployment, *, threads: int = THREADS) -> int:
    """Record the effects of every identity in ``history``; return how many were asked about."""
    wanted = identities_sent(history.events())
    oracles, extra = _oracles(deployment)
    try:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="oracle") as pool:
            for position, (tenant, key) in enumerate(wanted):
                pool.submit(record_effects, history, oracles[position % len(oracles)], tenant, key)
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

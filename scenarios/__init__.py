"""The scenario catalog: one module per named story, each exporting ``SCENARIO``.

The order is the order a run takes: scenarios that move the target's clock by days come last.
"""

from __future__ import annotations

from harness import Scenario, UsageError
from scenarios import (
    bad_input,
    bounded_storage,
    concurrent_retries,
    crash_mid_request,
    distinct_keys,
    handler_error,
    in_flight_retry,
    key_reuse,
    late_retry,
    missing_key,
    store_outage,
    tenant_collision,
    timeout_after_commit,
    zombie_original,
)

__all__ = ["CATALOG", "get_scenario", "scenario_names"]

CATALOG: dict[str, Scenario] = {
    module.SCENARIO.name: module.SCENARIO
    for module in (
        timeout_after_commit,
        concurrent_retries,
        in_flight_retry,
        key_reuse,
        distinct_keys,
        missing_key,
        tenant_collision,
        bad_input,
        crash_mid_request,
        zombie_original,
        handler_error,
        store_outage,
        late_retry,
        bounded_storage,
    )
}


def scenario_names() -> list[str]:
    return list(CATALOG)


def get_scenario(name: str) -> Scenario:
    try:
        return CATALOG[name]
    except KeyError:
        raise UsageError(
            f"unknown scenario {name!r}; known scenarios: {', '.join(CATALOG)} "
            "(`idem-harness scenarios` lists them with their stories)"
        ) from None

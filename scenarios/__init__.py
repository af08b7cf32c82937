"""The scenario catalog: one module per named story, each exporting ``SCENARIO``.

The order is the order a run takes: scenarios that move the target's clock by days come last.
HTTP scenarios come first, then the queue-consumer ones (issue 16); each kind is n/a, with
the reason, for the other kind of target.
"""

from __future__ import annotations

from harness import Scenario, Target, UsageError
from scenarios import (
    bad_input,
    bounded_storage,
    burst_of_copies,
    concurrent_retries,
    consumer_crash,
    crash_mid_request,
    cut_after_commit,
    distinct_keys,
    handler_error,
    in_flight_retry,
    key_reuse,
    late_redelivery,
    late_retry,
    lost_ack,
    missing_key,
    poison_message,
    redelivered_while_working,
    republish,
    store_outage,
    tenant_collision,
    timeout_after_commit,
    work_failure,
    zombie_original,
)

__all__ = ["CATALOG", "default_scenarios", "get_scenario", "scenario_names"]

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
        cut_after_commit,
        late_retry,
        bounded_storage,
        lost_ack,
        consumer_crash,
        redelivered_while_working,
        republish,
        burst_of_copies,
        poison_message,
        work_failure,
        late_redelivery,
    )
}


def default_scenarios(target: Target) -> list[Scenario]:
    """The catalog a run plays when no scenario is named: every scenario of the target's kind
    (HTTP or queue consumer); the other kind's would only add rows that say n/a."""
    from harness.consumer._scenario import ConsumerScenario
    from harness.consumer._target import ConsumerTarget

    consumer = isinstance(target, ConsumerTarget)
    return [s for s in CATALOG.values() if isinstance(s, ConsumerScenario) == consumer]


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

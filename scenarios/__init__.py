"""The scenario catalog: one module per named story, each exporting ``SCENARIO``.

The order is the order a run takes: scenarios that move the target's clock by days come last.
HTTP scenarios come first, then the queue-consumer ones (issue 16); each kind is n/a, with
the reason, for the other kind of target.  A consumer's catalog holds the scenarios its kind of
broker can play (issue 40: Kafka's rebalances and offsets are not RabbitMQ's).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness import Scenario, Target, UsageError
from scenarios import (
    bad_input,
    bounded_storage,
    burst_of_copies,
    cold_reassignment,
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
    offset_reset,
    poison_message,
    rebalance_while_working,
    redelivered_while_working,
    republish,
    store_outage,
    tenant_collision,
    timeout_after_commit,
    work_failure,
    zombie_original,
)

__all__ = ["CATALOG", "default_scenarios", "get_scenario", "named_for", "scenario_names",
           "unfit_for_every"]

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
        rebalance_while_working,
        cold_reassignment,
        republish,
        burst_of_copies,
        offset_reset,
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

    if not isinstance(target, ConsumerTarget):
        return [s for s in CATALOG.values() if not _is_consumer(s)]
    # a consumer's: those its kind of broker can play (a Kafka group's rebalance is not
    # RabbitMQ's, nor a RabbitMQ consumer's held acks Kafka's)
    return [s for s in CATALOG.values()
            if isinstance(s, ConsumerScenario) and s.fits_broker(target)]


def _is_consumer(scenario: Scenario) -> bool:
    from harness.consumer._scenario import ConsumerScenario

    return isinstance(scenario, ConsumerScenario)


def named_for(target: Target, names: Sequence[str]) -> list[Scenario]:
    """The scenarios ``names`` asks for against ``target`` (none: the target's default ones).
    A named scenario of the other kind (a queue-consumer scenario for an HTTP service, or the
    reverse) could only be n/a, and a run of nothing but n/a would pass on nothing: it is a
    usage error that names the scenarios that fit."""
    named = [get_scenario(name) for name in names]
    if not named:
        return default_scenarios(target)
    fitting = default_scenarios(target)
    unfit = [s.name for s in named if s not in fitting]
    if unfit:
        kind = "queue consumer" if _is_consumer(fitting[0]) else "HTTP service"
        raise UsageError(
            f"{', '.join(unfit)}: not a scenario for {target.name}, a {kind}\n  fix: name "
            f"scenarios of its kind: {', '.join(s.name for s in fitting)}")
    return named


def unfit_for_every(named: Sequence[Scenario], *, http: bool, consumers: bool) -> None:
    """Refuse named scenarios that fit no row of a matrix (an HTTP scenario where every row
    is a queue consumer, or the reverse): such a column could only be n/a."""
    unfit = [s.name for s in named if not (consumers if _is_consumer(s) else http)]
    if unfit:
        kind = "queue consumers" if consumers else "HTTP services"
        fitting = [s.name for s in CATALOG.values() if (consumers if _is_consumer(s) else http)]
        raise UsageError(
            f"{', '.join(unfit)}: no row of this matrix can play it (every row is one of the "
            f"{kind})\n  fix: name scenarios that fit the rows: {', '.join(fitting)}")


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

"""Consumer scenarios: ``Scenario``s of the one catalog that drive a queue consumer.

They sit in ``scenarios/`` beside the HTTP ones, with a story and a plan, so ``idem-harness
scenarios`` and ``explain`` show both kinds.  Each kind is not applicable to the other kind of
target, with the reason, so a run of the whole catalog says n/a instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness._errors import UsageError
from harness._scenario import Scenario
from harness._target import Target
from harness.consumer._context import ConsumerContext
from harness.consumer._target import BROKER_CAPABILITIES, ConsumerTarget

__all__ = ["CONSUMER_CAPABILITY_HINTS", "ConsumerScenario", "consumer_scenario", "http_only",
           "pause_before_commit"]

#: Why a consumer capability is missing, in the words of the target file.
CONSUMER_CAPABILITY_HINTS = {
    "clock": "a clock hook ([hooks] clock) or [clock] kind = \"faketime\" to advance the "
             "consumer's clock",
    "restart": "start.restartable = true",
    "instances": "start.shared_state = true (several consumers share one store)",
    "store-size": "a key-store size hook ([hooks] store_size)",
    "cleanup": "a cleanup hook ([hooks] cleanup)",
    "pause-before-work": "a pause hook with a before-work point ([hooks.pause])",
    "pause-before-ack": "a pause hook with a before-ack point ([hooks.pause])",
    "dedup-window": "a promised dedup window (promises.dedup_window)",
    "lease": "a promised lease (promises.lease)",
    "poison": "a poison message the consumer refuses ([message] poison)",
    "work-failure": "a hook that makes the job fail ([[hooks.work_failures]])",
    "republish": "a dedup key the producer chooses (dedup = \"header\" or \"body\"): with "
                 "dedup = \"message-id\" a republish is the same message",
    "ack-hold": "a RabbitMQ broker, where holding what the consumer sends holds only its acks",
    "offsets": "a Kafka broker ([broker] kind = \"kafka\"), whose group's offsets can be set "
               "back",
    "partitions": "a Kafka broker ([broker] kind = \"kafka\"), whose group hands a dead "
                  "member's partitions to another",
    "poll-interval": "a Kafka broker ([broker] kind = \"kafka\") and the consumer's "
                     "max.poll.interval, [broker] max_poll_interval (passed on as "
                     "{max_poll_interval_ms}, or the consumer's own)",
}


def http_only(target: Target) -> str | None:
    """Why an HTTP scenario cannot run against ``target``, when it is a queue consumer."""
    if isinstance(target, ConsumerTarget):
        return (f"an HTTP scenario: target {target.name} is a queue consumer, with no HTTP "
                "endpoint to send requests to")
    return None


def pause_before_commit(target: Target, fault: str) -> str | None:
    """Why no ``fault`` (a kill, a cut) can meet a job of ``target`` between its work and its
    commit: neither a held ack nor a pause after the work (None: one can)."""
    assert isinstance(target, ConsumerTarget)
    if {"ack-hold", "pause-before-ack"} & target.capabilities():
        return None
    return (f"target {target.name} lacks a pause hook with a before-commit point "
            f"([hooks.pause]): on its broker only a pause after the work lets {fault} meet "
            "the job between its work and its commit")


def _not_http(ctx: Any) -> None:
    """A consumer scenario's ``run``: an HTTP service's context (``ctx``) has nothing to
    publish to."""
    raise UsageError(f"{ctx.scenario.name} is a queue-consumer scenario: give a consumer "
                     "target (kind = \"consumer\")")


@dataclass(frozen=True)
class ConsumerScenario(Scenario):
    """A scenario whose ``drive`` publishes messages and faults a consumer."""

    kind: ClassVar[str] = "consumer"
    drive: Callable[[ConsumerContext], None] = field(default=lambda ctx: None)

    def fits_broker(self, target: ConsumerTarget) -> bool:
        """Can the target's kind of broker ever give what this scenario needs?  A scenario of
        the other broker's (setting a Kafka group's offsets back, holding only a RabbitMQ
        consumer's acks) is left out of the target's catalog, not shown n/a."""
        others = {cap for kind, caps in BROKER_CAPABILITIES.items()
                  if kind != target.broker.kind for cap in caps}
        return not (self.needs & others - BROKER_CAPABILITIES[target.broker.kind])

    def not_applicable(self, target: Target, *,
                       unavailable: Mapping[str, str] | None = None) -> str | None:
        if not isinstance(target, ConsumerTarget):
            return (f"a queue-consumer scenario: target {target.name} is an HTTP service, "
                    "with no queue to publish to")
        lost = sorted(self.needs & (unavailable or {}).keys())
        if lost:
            return "; ".join((unavailable or {})[m] for m in lost)
        missing = sorted(self.needs - target.capabilities())
        if missing:
            wanted = "; ".join(CONSUMER_CAPABILITY_HINTS.get(m, m) for m in missing)
            return f"target {target.name} lacks {wanted}"
        return self.applies(target)


def consumer_scenario(*, name: str, summary: str, story: str, properties: tuple[str, ...],
                      plan: tuple[str, ...], drive: Callable[[ConsumerContext], None],
                      needs: frozenset[str] = frozenset(),
                      applies: Callable[[Target], str | None] = lambda target: None,
                      ) -> ConsumerScenario:
    return ConsumerScenario(name=name, summary=summary, story=story, properties=properties,
                            plan=plan, run=_not_http, needs=needs, applies=applies, drive=drive)

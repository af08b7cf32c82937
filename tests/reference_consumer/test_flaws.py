"""Each named consumer flaw shows its mistake directly: real broker, real consumer process, real
store.  Where test_consumer.py does not already run the same steps against the correct consumer,
the test runs them against the shared correct one too, so the assertion is seen to tell the two
apart.  (check-then-insert is in test_consumer.py: it needs two consumers on one PostgreSQL.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.services._rabbitmq import RabbitServer
from reference_server.consumer import CONSUMER_FLAWS
from tests.reference_consumer.conftest import Consumers
from tests.reference_consumer.support import (
    ConsumerProcess,
    is_,
    publish,
    queue_depth,
    unique,
    until,
)


def test_every_flaw_has_a_story_and_the_properties_it_breaks() -> None:
    assert set(CONSUMER_FLAWS) == {
        "ack-before-work", "no-dedup", "dedup-after-work", "message-id-only",
        "check-then-insert", "short-dedup-window", "poison-requeue-forever"}
    for flaw in CONSUMER_FLAWS.values():
        assert flaw.summary and flaw.properties and flaw.switch


def test_ack_before_work_loses_the_job_when_the_consumer_dies(
    consumers: Consumers, queue: str,
) -> None:
    """The correct consumer, killed at the same point, does the job after a restart:
    test_consumer.py's test_a_consumer_killed_after_its_claim_is_taken_over_after_the_lease."""
    store = consumers.sqlite()
    options = ["--test-faults", "--flaw", "ack-before-work"]
    first = consumers.start(queue, options, store=store)
    key = unique("k")
    publish(consumers.broker.url, queue,
            [{"key": key, "headers": {"X-Test-Pause": "before-work:1000"}}])
    first.wait_for("the pause before the work", is_("pause", key, point="before-work"))
    assert first.count(is_("ack", key, outcome="received")) == 1
    first.kill()
    second = consumers.start(queue, options, store=store)
    assert queue_depth(consumers.broker.url, queue) == 0  # nothing left to deliver
    assert second.count(is_("deliver", key)) == 0
    assert second.effects(key) == 0


@pytest.mark.parametrize("flaw", ["no-dedup", "message-id-only"])
def test_a_republish_runs_the_job_again(consumers: Consumers, queue: str, flaw: str) -> None:
    """The same dedup key under a new message id (the correct consumer: test_consumer.py's
    test_a_republished_message_is_acked_without_work)."""
    consumer = consumers.start(queue, ["--flaw", flaw], store=consumers.sqlite())
    key = unique("k")
    publish(consumers.broker.url, queue, [{"key": key}, {"key": key}])
    until("both copies acked", lambda: consumer.count(is_("ack", key)) == 2)
    assert consumer.count(is_("ack", key, outcome="duplicate")) == 0
    assert consumer.effects(key) == 2


def test_message_id_only_still_deduplicates_a_redelivered_message_id(
    consumers: Consumers, queue: str,
) -> None:
    """The flaw is narrow: the same message id twice is still caught; only a new id is not."""
    consumer = consumers.start(queue, ["--flaw", "message-id-only"], store=consumers.sqlite())
    key, message_id = unique("k"), unique("m")
    publish(consumers.broker.url, queue, [{"key": key, "message_id": message_id}] * 2)
    consumer.wait_for("the copy's ack", is_("ack", key, outcome="duplicate"))
    assert consumer.effects(key) == 1


def _both(flawed: ConsumerProcess, correct: ConsumerProcess, broker: RabbitServer,
          copies: list[dict[str, Any]]) -> tuple[str, str]:
    """Publish the same copies of one job to the flawed and to the correct consumer's queue;
    the keys used on each."""
    keys = unique("k"), unique("k")
    for consumer, key in zip((flawed, correct), keys, strict=True):
        publish(broker.url, consumer.queue, [{**copy, "key": key} for copy in copies])
    return keys


def _acked(consumer: ConsumerProcess, key: str, times: int) -> Callable[[], bool]:
    return lambda: consumer.count(is_("ack", key)) == times


def test_dedup_after_work_runs_concurrent_copies_twice(
    consumers: Consumers, queue: str, correct: ConsumerProcess,
) -> None:
    flawed = consumers.start(queue, ["--flaw", "dedup-after-work", "--test-faults",
                                     "--prefetch", "2"], store=consumers.sqlite())
    slow = {"headers": {"X-Test-Pause": "before-work:300"}}
    bad, good = _both(flawed, correct, consumers.broker, [slow, slow])
    for consumer, key in ((flawed, bad), (correct, good)):
        until("both copies acked", _acked(consumer, key, 2))
    assert flawed.effects(bad) == 2
    assert correct.effects(good) == 1


def test_a_redelivery_after_five_minutes_runs_again_with_a_short_window(
    consumers: Consumers, queue: str, correct: ConsumerProcess,
) -> None:
    flawed = consumers.start(queue, ["--test-clock", "--retention", "24h", "--flaw",
                                     "short-dedup-window"], store=consumers.sqlite())
    bad, good = _both(flawed, correct, consumers.broker, [{}])
    for consumer, key in ((flawed, bad), (correct, good)):
        consumer.wait_for("the first ack", is_("ack", key, outcome="done"))
        consumer.admin("POST", "/clock/advance", json={"seconds": 301})
        publish(consumers.broker.url, consumer.queue, [{"key": key}])
        until("the late copy acked", _acked(consumer, key, 2))
    assert flawed.effects(bad) == 2
    assert correct.effects(good) == 1  # its --retention is the default, 24 h


def test_poison_requeued_forever_never_reaches_the_dead_letter_queue(
    consumers: Consumers, queue: str,
) -> None:
    """The correct consumer dead-letters the same message at its first delivery:
    test_consumer.py's test_poison_is_dead_lettered_at_once_and_failing_work_after_max_attempts."""
    consumer = consumers.start(queue, ["--max-attempts", "3", "--flaw", "poison-requeue-forever"],
                               store=consumers.sqlite())
    key = unique("poison")
    publish(consumers.broker.url, queue, [{"key": key, "body": b"{not json"}])
    until("more deliveries than --max-attempts allows",
          lambda: consumer.count(is_("deliver", key)) > 3 + 2)
    assert consumer.count(is_("dead-letter", key)) == 0
    assert queue_depth(consumers.broker.url, f"{queue}.dead") == 0
    assert consumer.effects(key) == 0

"""The correct reference consumer on a real broker and a real store: each rule of issue 16's
"Reference consumer" once, synchronised on the consumer's event feed."""

from __future__ import annotations

import pytest

from harness.services._rabbitmq import RabbitServer
from harness.services._toxiproxy import Toxic, ToxiproxyServer
from tests.reference_consumer.conftest import Consumers
from tests.reference_consumer.support import (
    ConsumerProcess,
    is_,
    publish,
    queue_depth,
    unique,
    until,
)


def test_a_charge_is_processed_once_and_acked_after_its_commit(
    correct: ConsumerProcess, rabbitmq_server: RabbitServer,
) -> None:
    key = unique("k")
    publish(rabbitmq_server.url, correct.queue, [{"key": key}])
    correct.wait_for("the ack", is_("ack", key, outcome="done"))
    order = [e["type"] for e in correct.events()[0] if e.get("key") == key]
    assert order == ["deliver", "claim", "commit", "ack"]
    assert correct.effects(key) == 1


def test_without_the_header_the_message_id_is_the_key(
    correct: ConsumerProcess, rabbitmq_server: RabbitServer,
) -> None:
    message_id = unique("m")
    publish(rabbitmq_server.url, correct.queue, [{"message_id": message_id}] * 2)
    correct.wait_for("the second copy's ack", is_("ack", message_id, outcome="duplicate"))
    assert correct.effects(message_id) == 1


def test_a_republished_message_is_acked_without_work(
    correct: ConsumerProcess, rabbitmq_server: RabbitServer,
) -> None:
    """A producer's republish after a lost confirm: the same key under a new message id."""
    key = unique("k")
    publish(rabbitmq_server.url, correct.queue, [{"key": key}, {"key": key}])
    correct.wait_for("the copy's ack", is_("ack", key, outcome="duplicate"))
    assert correct.count(is_("commit", key)) == 1
    assert correct.effects(key) == 1


def test_poison_is_dead_lettered_at_once_and_failing_work_after_max_attempts(
    correct: ConsumerProcess, rabbitmq_server: RabbitServer,
) -> None:
    bad, failing = unique("bad"), unique("fails")
    dead_before = queue_depth(rabbitmq_server.url, f"{correct.queue}.dead")
    publish(rabbitmq_server.url, correct.queue, [
        {"key": bad, "body": {"amount": -5, "currency": "EUR"}},
        {"key": failing, "headers": {"X-Test-Fault": "handler-error"}},
    ])
    correct.wait_for("the poison's dead-lettering", is_("dead-letter", bad))
    correct.wait_for("the failing job's dead-lettering", is_("dead-letter", failing))
    assert correct.count(is_("deliver", bad)) == 1
    assert correct.count(is_("deliver", failing)) == 3  # --max-attempts 3
    assert correct.effects(bad) == correct.effects(failing) == 0
    assert queue_depth(rabbitmq_server.url, f"{correct.queue}.dead") == dead_before + 2


def test_prefetch_runs_several_jobs_at_once(
    correct: ConsumerProcess, rabbitmq_server: RabbitServer,
) -> None:
    keys = [unique("k") for _ in range(8)]
    slow = {"X-Test-Pause": "before-work:200"}
    publish(rabbitmq_server.url, correct.queue, [{"key": key, "headers": slow} for key in keys])
    until("every job acked", lambda: correct.count(
        lambda e: e["type"] == "ack" and e.get("key") in keys) == 8)
    running = most = 0
    for event in correct.events()[0]:
        if event.get("key") in keys:
            running += {"claim": 1, "commit": -1}.get(event["type"], 0)
            most = max(most, running)
    assert most > 1
    assert [correct.effects(key) for key in keys] == [1] * 8


def test_a_lost_ack_means_a_redelivery_acked_without_work(
    consumers: Consumers, queue: str, toxiproxy_server: ToxiproxyServer,
) -> None:
    """The connection is cut after the commit, before the ack: the broker delivers again."""
    proxy = toxiproxy_server.client.create_proxy(
        unique("amqp"), f"{consumers.broker.host}:{consumers.broker.port}")
    try:
        consumer = consumers.start(
            queue, ["--test-faults"], store=consumers.sqlite(),
            amqp_url=f"amqp://guest:guest@{proxy.host}:{proxy.port}/")
        key = unique("k")
        publish(consumers.broker.url, queue,
                [{"key": key, "headers": {"X-Test-Pause": "before-ack:1500"}}])
        consumer.wait_for("the pause before the ack", is_("pause", key, point="before-ack"))
        with proxy.down():
            consumer.wait_for("the lost ack", is_("ack-lost", key))
        consumer.wait_for("the redelivery's ack", is_("ack", key, outcome="duplicate"))
        assert consumer.count(is_("deliver", key, redelivered=True)) == 1
        assert consumer.count(is_("reconnected")) >= 1
        assert consumer.effects(key) == 1
    finally:
        proxy.delete()


def test_a_stalled_consumer_s_message_goes_to_another_which_does_not_run_it_again(
    consumers: Consumers, queue: str, toxiproxy_server: ToxiproxyServer,
) -> None:
    """The first consumer's connection stalls while it works: the broker gives up on it after
    missed heartbeats and redelivers to the second, which holds the message while the first's
    claim is live, and acks it without work once the first has committed."""
    proxy = toxiproxy_server.client.create_proxy(
        unique("amqp"), f"{consumers.broker.host}:{consumers.broker.port}")
    try:
        store = consumers.sqlite()
        options = ["--test-faults", "--heartbeat", "1s"]
        first = consumers.start(queue, options, store=store,
                                amqp_url=f"amqp://guest:guest@{proxy.host}:{proxy.port}/")
        key = unique("k")
        publish(consumers.broker.url, queue,
                [{"key": key, "headers": {"X-Test-Pause": "before-work:5000"}}])
        first.wait_for("the first consumer's pause", is_("pause", key, point="before-work"))
        second = consumers.start(queue, options, store=store)
        for stream in ("upstream", "downstream"):
            proxy.add_toxic(Toxic("timeout", stream, {"timeout": 0}))
        second.wait_for("the redelivery", is_("deliver", key, redelivered=True))
        second.wait_for("the redelivery's ack", is_("ack", key, outcome="duplicate"))
        assert first.count(is_("commit", key)) == 1
        assert second.count(is_("claim", key)) == 0
        assert second.effects(key) == 1
    finally:
        proxy.delete()


def test_a_consumer_killed_after_its_claim_is_taken_over_after_the_lease(
    consumers: Consumers, queue: str,
) -> None:
    """Killed during the work: the redelivery finds the key claimed, holds it (no requeue loop),
    and takes it over once the lease has run out on the shared clock."""
    store = consumers.sqlite()
    options = ["--test-faults", "--test-clock", "--lease", "30s"]
    first = consumers.start(queue, options, store=store)
    key = unique("k")
    publish(consumers.broker.url, queue,
            [{"key": key, "headers": {"X-Test-Pause": "before-work:2000"}}])
    first.wait_for("the claim's pause", is_("pause", key, point="before-work"))
    first.kill()
    second = consumers.start(queue, options, store=store)
    second.wait_for("the wait on the dead consumer's claim", is_("wait", key))
    assert second.effects(key) == 0
    second.admin("POST", "/clock/advance", json={"seconds": 31})
    second.wait_for("the job's ack", is_("ack", key, outcome="done"))
    assert second.count(is_("claim", key)) == 1
    assert second.count(is_("nack", key)) == 0
    assert second.effects(key) == 1


def test_finished_keys_are_kept_for_the_retention_then_cleaned_up(
    consumers: Consumers, queue: str,
) -> None:
    consumer = consumers.start(queue, ["--test-clock", "--retention", "1h"],
                               store=consumers.sqlite())
    key = unique("k")
    publish(consumers.broker.url, queue, [{"key": key}])
    consumer.wait_for("the ack", is_("ack", key))
    consumer.admin("POST", "/clock/advance", json={"seconds": 3000})
    assert consumer.admin("GET", "/keys")["rows"] == 1
    publish(consumers.broker.url, queue, [{"key": key}])  # within the window: a duplicate
    consumer.wait_for("the duplicate's ack", is_("ack", key, outcome="duplicate"))
    consumer.admin("POST", "/clock/advance", json={"seconds": 601})  # past the window
    assert consumer.admin("GET", "/keys")["rows"] == 0
    assert consumer.effects(key) == 1


@pytest.mark.parametrize("flaw", [None, "check-then-insert"])
def test_several_consumers_on_one_postgresql(
    consumers: Consumers, queue: str, flaw: str | None,
) -> None:
    """Copies of each message reach two consumers at once: one effect per key, unless the claim
    is a lookup followed by an insert (the flaw), where both consumers see nothing."""
    store = consumers.postgresql()
    options = ["--prefetch", "4"] + ([] if flaw is None else ["--flaw", flaw])
    pair = [consumers.start(queue, options, store=store) for _ in range(2)]
    keys = [unique("k") for _ in range(6)]
    publish(consumers.broker.url, queue, [{"key": key} for key in keys for _ in range(2)])
    until("both copies of every key acked",
          lambda: all(sum(c.count(is_("ack", key)) for c in pair) == 2 for key in keys))
    effects = [pair[0].effects(key) for key in keys]
    if flaw is None:
        assert effects == [1] * len(keys)
        assert all(c.count(is_("deliver")) > 0 for c in pair)  # both consumers took messages
    else:
        assert max(effects) == 2, effects


def test_a_key_header_in_two_spellings_is_dead_lettered_as_ambiguous(
    correct: ConsumerProcess, rabbitmq_server: RabbitServer,
) -> None:
    first, second = unique("k"), unique("k")
    publish(rabbitmq_server.url, correct.queue,
            [{"headers": {"Idempotency-Key": first, "idempotency-key": second}}])
    correct.wait_for("the ambiguous message's poison event",
                     lambda e: e["type"] == "poison" and "header twice" in e.get("reason", ""))
    assert correct.effects(first) == correct.effects(second) == 0

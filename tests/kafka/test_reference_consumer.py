"""The reference consumer on Kafka, driven directly: a real broker, real consumer processes
reaching it through Toxiproxy, a real SQLite store.  Each flaw is shown beside the correct
consumer doing the same steps, so every assertion is seen to tell the two apart.

Kills land inside a test pause the consumer announces in its events feed (``pause``), never
after a sleep: after the work and before the offset commit (``before-ack``), or before the work.

Kafka counts no deliveries, so a consumer cannot tell a record it reads again from a new one: a
test hook applies again in every process that reads the record.  The process that reads it
again (a restart, the other member) therefore runs without ``--test-faults`` here.
"""

from __future__ import annotations

import pytest

from harness.services._kafka_client import read_topic
from reference_server.consumer import CONSUMER_FLAWS
from reference_server.consumer.flaws import KAFKA_CONSUMER_FLAWS
from tests.kafka.conftest import KafkaConsumers
from tests.kafka.reference import produce
from tests.kafka.support import unique
from tests.reference_consumer.support import is_, until

FAULTS = ("--test-faults",)


def test_the_kafka_flaws_are_named_with_their_stories() -> None:
    assert set(KAFKA_CONSUMER_FLAWS) == {
        "auto-commit-before-work", "dedup-in-memory", "dedup-separate-txn",
        "commit-before-work", "dedup-on-offset"}
    assert not set(KAFKA_CONSUMER_FLAWS) & set(CONSUMER_FLAWS)
    for flaw in KAFKA_CONSUMER_FLAWS.values():
        assert flaw.summary and flaw.properties and flaw.switch


def test_a_record_is_charged_once_and_its_offset_committed_after(
    kafka_consumers: KafkaConsumers,
) -> None:
    topic, group = kafka_consumers.topic(), unique("group")
    consumer = kafka_consumers.start(topic, group, store=kafka_consumers.sqlite())
    key = unique("k")
    [sent] = produce(kafka_consumers.server, topic, [{"key": key}])
    done = consumer.wait_for("the offset commit", is_("offset-commit", key, outcome="done"))
    deliver = consumer.wait_for("the delivery", is_("deliver", key))
    commit = consumer.wait_for("the effect's commit", is_("commit", key))
    assert (deliver["topic"], deliver["partition"], deliver["offset"]) == (
        topic, sent.partition, sent.offset)
    assert deliver["index"] < commit["index"] < done["index"]
    assert consumer.effects(key) == 1
    assert kafka_consumers.server.admin().committed_offsets(group, topic) == {0: sent.offset + 1}


@pytest.mark.parametrize("flaw", [None, "dedup-on-offset"])
def test_a_producer_retry_writes_the_record_again(
    kafka_consumers: KafkaConsumers, flaw: str | None,
) -> None:
    """The same job at two offsets: the correct consumer finds the key; ``dedup-on-offset``
    takes the second offset for a new job."""
    topic, group = kafka_consumers.topic(), unique("group")
    options = [] if flaw is None else ["--flaw", flaw]
    consumer = kafka_consumers.start(topic, group, options, store=kafka_consumers.sqlite())
    key = unique("k")
    produce(kafka_consumers.server, topic, [{"key": key}, {"key": key}])
    until("both records committed", lambda: consumer.count(is_("offset-commit", key)) == 2)
    duplicates = consumer.count(is_("offset-commit", key, outcome="duplicate"))
    if flaw is None:
        assert (consumer.effects(key), duplicates) == (1, 1)
    else:
        assert (consumer.effects(key), duplicates) == (2, 0)


@pytest.mark.parametrize("flaw", [None, "dedup-in-memory"])
def test_a_kill_after_the_work_and_before_the_offset_commit(
    kafka_consumers: KafkaConsumers, flaw: str | None,
) -> None:
    """The record is read again from the last committed offset: the correct consumer finds its
    key done in the store; ``dedup-in-memory`` forgot it with the process."""
    topic, group = kafka_consumers.topic(), unique("group")
    store = kafka_consumers.sqlite()
    options = [*FAULTS, *([] if flaw is None else ["--flaw", flaw])]
    first = kafka_consumers.start(topic, group, options, store=store)
    key = unique("k")
    produce(kafka_consumers.server, topic, [{"key": key,
                                            "headers": {"X-Test-Pause": "before-ack:20000"}}])
    first.wait_for("the pause after the work", is_("pause", key, point="before-ack"))
    assert first.count(is_("commit", key)) == 1
    first.kill()
    assert kafka_consumers.server.admin().committed_offsets(group, topic) == {0: None}
    second = kafka_consumers.start(topic, group, options[len(FAULTS):], store=store)
    second.wait_for("the record read again", is_("deliver", key))
    settled = second.wait_for("the offset commit", is_("offset-commit", key))
    if flaw is None:
        assert settled["outcome"] == "duplicate"
        assert second.effects(key) == 1
    else:
        assert settled["outcome"] == "done"
        assert second.effects(key) == 2


@pytest.mark.parametrize("flaw", [None, "commit-before-work", "auto-commit-before-work"])
def test_a_kill_before_the_work(kafka_consumers: KafkaConsumers, flaw: str | None) -> None:
    """The correct consumer has committed nothing: the record is read again and charged.  The
    two committing flaws have moved the group past it: the job is lost."""
    topic, group = kafka_consumers.topic(), unique("group")
    store = kafka_consumers.sqlite()
    options = [*FAULTS, "--lease", "1s", *([] if flaw is None else ["--flaw", flaw])]
    first = kafka_consumers.start(topic, group, options, store=store)
    key = unique("k")
    [sent] = produce(kafka_consumers.server, topic, [{"key": key, "headers": {
        "X-Test-Pause": "before-work:20000"}}])
    first.wait_for("the pause before the work", is_("pause", key, point="before-work"))
    admin = kafka_consumers.server.admin()
    if flaw == "auto-commit-before-work":  # the client's timer commits while the job waits
        # (its event comes with the next poll, after the job: the group shows it now)
        until("the timer's commit past the record",
              lambda: admin.committed_offsets(group, topic)[0] == sent.offset + 1)
    first.kill()
    committed = admin.committed_offsets(group, topic)[0]
    second = kafka_consumers.start(topic, group, options[len(FAULTS):], store=store)
    if flaw is None:
        assert committed is None
        second.wait_for("the charge after the lease", is_("commit", key), timeout=45)
        assert second.effects(key) == 1
    else:
        assert committed == sent.offset + 1
        produce(kafka_consumers.server, topic, [{"key": unique("after")}])
        second.wait_for("the next record", lambda e: e["type"] == "deliver")
        assert second.count(is_("deliver", key)) == 0
        assert second.effects(key) == 0


@pytest.mark.parametrize("flaw", [None, "dedup-separate-txn"])
def test_copies_on_two_partitions_read_by_two_members_at_once(
    kafka_consumers: KafkaConsumers, flaw: str | None,
) -> None:
    """A producer retry whose copy lands on another partition: two members work the key at
    once.  The correct claim lets one charge; looking, charging, then writing the key lets both."""
    topic, group = kafka_consumers.topic(partitions=2), unique("group")
    store = kafka_consumers.sqlite()
    options = [*FAULTS, *([] if flaw is None else ["--flaw", flaw])]
    members = [kafka_consumers.start(topic, group, options, store=store) for _ in range(2)]
    admin = kafka_consumers.server.admin()
    until("each member holds one partition", lambda: sorted(
        len(m.partitions) for m in admin.group(group).members) == [1, 1])
    key = unique("k")
    slow = {"key": key, "headers": {"X-Test-Pause": "before-work:700"}}
    produce(kafka_consumers.server, topic, [{**slow, "partition": 0}, {**slow, "partition": 1}])
    until("both copies committed", lambda: sum(
        m.count(is_("offset-commit", key)) for m in members) == 2)
    effects = members[0].effects(key)
    assert effects == (1 if flaw is None else 2)


@pytest.mark.parametrize("flaw", [None, "dedup-in-memory"])
def test_a_member_paused_past_max_poll_interval_loses_its_partition_to_another(
    kafka_consumers: KafkaConsumers, flaw: str | None,
) -> None:
    """The zombie: the first member's job outlives max.poll.interval.ms, the group hands its
    partition to the second member, which reads the record again from the committed offset.
    The correct second member waits for the key the zombie still holds, then finds it done."""
    topic, group = kafka_consumers.topic(partitions=2), unique("group")
    store = kafka_consumers.sqlite()
    flawed = [] if flaw is None else ["--flaw", flaw]
    zombie = kafka_consumers.start(topic, group, [*FAULTS, "--max-poll-interval", "3s", *flawed],
                                   store=store)
    # The other member may wait for the zombie's key longer than 3 s without polling: a poll
    # interval of its own that allows it keeps it from becoming a zombie in turn.
    other = kafka_consumers.start(topic, group, ["--max-poll-interval", "30s", *flawed],
                                  store=store)
    admin = kafka_consumers.server.admin()
    until("each member holds one partition", lambda: sorted(
        len(m.partitions) for m in admin.group(group).members) == [1, 1])
    client = f"reference-consumer-{zombie.admin('GET', '/health')['pid']}"
    [(_, partition)] = next(m.partitions for m in admin.group(group).members
                            if m.client_id == client)
    key = unique("k")
    produce(kafka_consumers.server, topic, [{"key": key, "partition": partition,
                                            "headers": {"X-Test-Pause": "before-work:7000"}}])
    zombie.wait_for("the pause in the job", is_("pause", key))
    other.wait_for("the record read again by the other member", is_("deliver", key),
                   timeout=30)
    zombie.wait_for("the zombie's commit refused", is_("ack-lost", key), timeout=30)
    zombie.wait_for("the zombie told it left its group", is_("left-group"), timeout=10)
    other.wait_for("the other member's offset commit", is_("offset-commit", key), timeout=30)
    assert zombie.count(is_("commit", key)) == 1
    if flaw is None:
        assert other.count(is_("offset-commit", key, outcome="duplicate")) == 1
        assert other.effects(key) == 1
    else:
        assert other.effects(key) == 2


def test_poison_goes_to_the_dead_letter_topic_and_the_next_record_is_charged(
    kafka_consumers: KafkaConsumers,
) -> None:
    topic, group = kafka_consumers.topic(), unique("group")
    consumer = kafka_consumers.start(topic, group, store=kafka_consumers.sqlite())
    poison, good = unique("poison"), unique("good")
    sent = produce(kafka_consumers.server, topic, [
        {"key": poison, "body": b"{not json"}, {"key": good}])
    dead = consumer.wait_for("the poison dead-lettered", is_("dead-letter", poison))
    consumer.wait_for("the next record's commit", is_("offset-commit", good, outcome="done"))
    assert "not a valid charge" in dead["reason"]
    assert dead["queue"] == f"{topic}.dead"
    assert consumer.effects(poison) == 0
    assert consumer.effects(good) == 1
    [letter] = read_topic(kafka_consumers.server.bootstrap, f"{topic}.dead")
    assert letter.value == b"{not json"
    assert letter.header("Idempotency-Key") == poison.encode()
    assert b"not a valid charge" in (letter.header("x-dead-letter-reason") or b"")
    assert letter.header("x-original-offset") == str(sent[0].offset).encode()
    assert kafka_consumers.server.admin().committed_offsets(group, topic) == {
        0: sent[1].offset + 1}


@pytest.mark.parametrize(("dedup", "record"), [
    ("key", {"record_key": "k-in-key"}),
    ("body", {"body": {"key": "k-in-body", "amount": 700, "currency": "EUR"}}),
])
def test_the_dedup_key_may_be_the_record_key_or_a_body_field(
    kafka_consumers: KafkaConsumers, dedup: str, record: dict[str, object],
) -> None:
    topic, group = kafka_consumers.topic(), unique("group")
    consumer = kafka_consumers.start(topic, group, ["--dedup", dedup],
                                     store=kafka_consumers.sqlite())
    produce(kafka_consumers.server, topic, [record, record])
    expected = "k-in-key" if dedup == "key" else "k-in-body"
    until("both records committed",
          lambda: consumer.count(is_("offset-commit", expected)) == 2)
    assert consumer.effects(expected) == 1
    produce(kafka_consumers.server, topic, [{}])  # no key where the consumer looks: poison
    consumer.wait_for("the keyless record dead-lettered",
                      lambda e: e["type"] == "dead-letter" and "nothing to deduplicate" in
                      e["reason"])


def test_a_cut_link_stalls_the_consumer_and_it_resumes(
    kafka_consumers: KafkaConsumers,
) -> None:
    topic, group = kafka_consumers.topic(), unique("group")
    consumer = kafka_consumers.start(topic, group, store=kafka_consumers.sqlite())
    proxy = kafka_consumers.server.proxy(kafka_consumers.link_of(consumer))
    key = unique("k")
    with proxy.down():
        produce(kafka_consumers.server, topic, [{"key": key}])
        consumer.wait_for("the lost connection", is_("disconnected"), timeout=20)
        assert consumer.count(is_("deliver", key)) == 0
    consumer.wait_for("the charge after the link is back", is_("offset-commit", key),
                      timeout=40)
    assert consumer.effects(key) == 1



def test_a_link_cut_at_the_offset_commit_reads_the_record_again_and_finds_it_done(
    kafka_consumers: KafkaConsumers,
) -> None:
    """The cut lands after the effect committed and before the offset commit; it lasts until the
    group has dropped the member (its heartbeats cannot pass), so the commit, sent once the link
    is back, is refused, and the record is read again: a duplicate, one charge."""
    topic, group = kafka_consumers.topic(), unique("group")
    consumer = kafka_consumers.start(topic, group, FAULTS, store=kafka_consumers.sqlite())
    proxy = kafka_consumers.server.proxy(kafka_consumers.link_of(consumer))
    admin = kafka_consumers.server.admin()
    key = unique("k")
    produce(kafka_consumers.server, topic, [{"key": key,
                                            "headers": {"X-Test-Pause": "before-ack:1500"}}])
    consumer.wait_for("the pause after the work", is_("pause", key, point="before-ack"))
    with proxy.down():
        until("the group dropped the cut-off member", lambda: admin.group(group).members == ())
    consumer.wait_for("the refused offset commit", is_("ack-lost", key), timeout=60)
    consumer.wait_for("the record read again, a duplicate",
                      is_("offset-commit", key, outcome="duplicate"), timeout=60)
    assert consumer.count(is_("commit", key)) == 1
    assert consumer.effects(key) == 1


def test_the_dedup_window_follows_the_test_clock(kafka_consumers: KafkaConsumers) -> None:
    """The clock hook works on Kafka as on RabbitMQ: a copy inside the window is a duplicate,
    one after the clock moved past it is a new job (allowed past the promised window)."""
    topic, group = kafka_consumers.topic(), unique("group")
    consumer = kafka_consumers.start(topic, group, ["--test-clock", "--retention", "60s"],
                                     store=kafka_consumers.sqlite())
    key = unique("k")
    produce(kafka_consumers.server, topic, [{"key": key}, {"key": key}])
    until("both copies committed", lambda: consumer.count(is_("offset-commit", key)) == 2)
    assert consumer.effects(key) == 1
    consumer.admin("POST", "/clock/advance", json={"seconds": 61})
    produce(kafka_consumers.server, topic, [{"key": key}])
    until("the late copy committed", lambda: consumer.count(is_("offset-commit", key)) == 3)
    assert consumer.count(is_("offset-commit", key, outcome="done")) == 2
    assert consumer.effects(key) == 2


def test_failing_work_is_read_again_then_dead_lettered_at_max_attempts(
    kafka_consumers: KafkaConsumers,
) -> None:
    """Kafka has no nack: the consumer seeks back to the record and reads it again."""
    topic, group = kafka_consumers.topic(), unique("group")
    consumer = kafka_consumers.start(topic, group, [*FAULTS, "--max-attempts", "3"],
                                     store=kafka_consumers.sqlite())
    once, always = unique("once"), unique("always")
    produce(kafka_consumers.server, topic, [
        {"key": once, "headers": {"X-Test-Fault": "before-work"}},
        {"key": always, "headers": {"X-Test-Fault": "before-work:every"}}])
    consumer.wait_for("the failing record dead-lettered", is_("dead-letter", always))
    assert consumer.count(is_("work-failed", once)) == 1
    assert consumer.count(is_("offset-commit", once, outcome="done")) == 1
    assert consumer.count(is_("work-failed", always)) == 3
    assert consumer.count(is_("nack", always)) == 2
    assert (consumer.effects(once), consumer.effects(always)) == (1, 0)
    [letter] = read_topic(kafka_consumers.server.bootstrap, f"{topic}.dead")
    assert letter.header("Idempotency-Key") == always.encode()

"""The Kafka corpus, driven directly: each consumer written on a published client (confluent-kafka,
aiokafka, kafkajs, franz-go), on the session's real broker through a Toxiproxy link, with its own
real store.  Each correct mode does the right thing at the moments that matter; each named flaw
(flaws.toml) misbehaves as named at its moment.  The harness's catalog is not used: Kafka targets
join it in the integration step (docs/kafka-notes.md).

Kafka counts no deliveries, so a consumer restarted after a kill honours the record's test hook
again: the pauses here are short (3 s) for that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.services._kafka import KafkaLink, KafkaServer
from harness.services._kafka_client import read_topic
from tests.kafka.reference import produce
from tests.kafka.support import unique
from tests.kafka_corpus.support import CONSUMERS, FLAWS, CorpusProcess, Event, Flaw, installed
from tests.missing import missing
from tests.reference_consumer.support import until

PAUSE_MS = 3000


class Corpus:
    """One test's topic (and its dead-letter topic), group and consumer processes."""

    def __init__(self, server: KafkaServer, workdir: Path, name: str) -> None:
        if not installed(name):
            missing(f"the Kafka corpus consumer {name} is not installed: run `make kafka-corpus` "
                    "(tests/kafka_corpus/install-all)", kind="corpus consumer")
        self.server, self.workdir, self.name = server, workdir, name
        self.topic, self.group = unique(name.replace("_", "-")), unique("group")
        admin = server.admin()
        admin.create_topic(self.topic)
        admin.create_topic(f"{self.topic}.dead")
        self._started: list[tuple[CorpusProcess, KafkaLink]] = []

    def start(self, flaw: str | None = None) -> CorpusProcess:
        link = self.server.take_link()
        process = CorpusProcess(self.name, bootstrap=link.bootstrap, topic=self.topic,
                                group=self.group, workdir=self.workdir, flaw=flaw)
        self._started.append((process, link))
        return process.start()

    def committed(self) -> int | None:
        return self.server.admin().committed_offsets(self.group, self.topic)[0]

    def close(self) -> None:
        for process, link in self._started:
            process.kill()
            self.server.release_link(link)


@pytest.fixture
def corpus(kafka_server: KafkaServer, tmp_path: Path) -> Iterator[Callable[[str], Corpus]]:
    made: list[Corpus] = []

    def make(name: str) -> Corpus:
        made.append(Corpus(kafka_server, tmp_path, name))
        return made[-1]

    yield make
    for one in made:
        one.close()


def of(type_: str, key: str | None = None, **fields: object) -> Callable[[Event], bool]:
    return lambda e: (e["type"] == type_ and (key is None or e.get("key") == key)
                      and all(e.get(name) == value for name, value in fields.items()))


def settled(key: str) -> Callable[[Event], bool]:
    """The end of a record's handling: its offset commit, or (auto-committing flaws) its end."""
    return lambda e: e["type"] in ("offset-commit", "processed") and e.get("key") == key


NAMES = list(CONSUMERS)


def test_every_consumer_has_two_flaws_or_more() -> None:
    for name in NAMES:
        assert len([f for f in FLAWS if f.consumer == name]) >= 2, name
    assert {f.consumer for f in FLAWS} == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_correct_mode_charges_a_producer_retry_once(
    corpus: Callable[[str], Corpus], name: str,
) -> None:
    run = corpus(name)
    consumer = run.start()
    key = unique("k")
    sent = produce(run.server, run.topic, [{"key": key}, {"key": key}])
    until("both records committed", lambda: consumer.count(of("offset-commit", key)) == 2)
    assert consumer.count(of("offset-commit", key, outcome="duplicate")) == 1
    assert consumer.effects(key) == 1
    assert run.committed() == sent[1].offset + 1


@pytest.mark.parametrize("name", NAMES)
def test_correct_mode_survives_a_kill_after_the_work_before_the_offset_commit(
    corpus: Callable[[str], Corpus], name: str,
) -> None:
    run = corpus(name)
    first = run.start()
    key = unique("k")
    produce(run.server, run.topic, [{"key": key, "headers": {
        "X-Test-Pause": f"before-commit:{PAUSE_MS}"}}])
    first.wait_for("the pause before the offset commit", of("pause", key, point="before-commit"))
    assert first.count(of("commit", key)) == 1
    first.kill()
    assert run.committed() is None
    second = run.start()
    second.wait_for("the record read again and committed", of("offset-commit", key),
                    timeout=45)
    assert second.count(of("offset-commit", key, outcome="duplicate")) == 1
    assert second.effects(key) == 1


@pytest.mark.parametrize("name", NAMES)
def test_correct_mode_commits_nothing_before_its_work(
    corpus: Callable[[str], Corpus], name: str,
) -> None:
    """The moment the committing flaws lose a job at: the correct consumer has committed
    nothing while its job runs, so a kill then would read the record again."""
    run = corpus(name)
    consumer = run.start()
    key = unique("k")
    [sent] = produce(run.server, run.topic, [{"key": key, "headers": {
        "X-Test-Pause": f"before-work:{PAUSE_MS}"}}])
    consumer.wait_for("the pause before the work", of("pause", key, point="before-work"))
    assert run.committed() is None
    consumer.wait_for("the offset commit", of("offset-commit", key, outcome="done"), timeout=30)
    assert run.committed() == sent.offset + 1
    assert consumer.effects(key) == 1


@pytest.mark.parametrize("name", NAMES)
def test_correct_mode_dead_letters_poison_and_goes_on(
    corpus: Callable[[str], Corpus], name: str,
) -> None:
    run = corpus(name)
    consumer = run.start()
    poison, good = unique("poison"), unique("good")
    sent = produce(run.server, run.topic, [{"key": poison, "body": b"{not json"},
                                           {"key": good}])
    consumer.wait_for("the poison dead-lettered", of("dead-letter", poison))
    consumer.wait_for("the next record committed", of("offset-commit", good, outcome="done"))
    assert consumer.effects(poison) == 0
    assert consumer.effects(good) == 1
    [letter] = read_topic(run.server.bootstrap, f"{run.topic}.dead")
    assert letter.value == b"{not json"
    assert letter.header("x-dead-letter-reason")
    assert run.committed() == sent[1].offset + 1


@pytest.mark.parametrize("flaw", FLAWS, ids=lambda f: f"{f.consumer}-{f.name}")
def test_each_flaw_misbehaves_as_named(corpus: Callable[[str], Corpus], flaw: Flaw) -> None:
    run = corpus(flaw.consumer)
    first = run.start(flaw.name)
    key = unique("k")
    if flaw.drive == "producer-retry":
        produce(run.server, run.topic, [{"key": key}, {"key": key}])
        until("both records handled", lambda: first.count(settled(key)) == 2)
        assert first.effects(key) == 2, "P1: a producer retry ran the job again"
    elif flaw.drive == "kill-after-work":
        produce(run.server, run.topic, [{"key": key, "headers": {
            "X-Test-Pause": f"before-commit:{PAUSE_MS}"}}])
        first.wait_for("the pause after the work", of("pause", key, point="before-commit"))
        first.kill()
        second = run.start(flaw.name)
        second.wait_for("the record read again and handled", settled(key), timeout=45)
        assert second.effects(key) == 2, "P1: the record read again ran the job again"
    elif flaw.drive == "kill-before-work":
        [sent] = produce(run.server, run.topic, [{"key": key, "headers": {
            "X-Test-Pause": f"before-work:{PAUSE_MS}"}}])
        first.wait_for("the pause before the work", of("pause", key, point="before-work"))
        until("the offset committed past the record while the job waits",
              lambda: run.committed() == sent.offset + 1, timeout=PAUSE_MS / 1000 - 0.5)
        first.kill()
        second = run.start(flaw.name)
        after = unique("after")
        produce(run.server, run.topic, [{"key": after}])
        second.wait_for("the next record", of("deliver", after))
        assert second.count(of("deliver", key)) == 0
        assert second.effects(key) == 0, "P2: the job was lost"
    else:
        raise AssertionError(f"flaws.toml: {flaw.consumer}/{flaw.name} has an unknown drive "
                             f"{flaw.drive!r}; write producer-retry, kill-after-work or "
                             "kill-before-work")

"""The Kafka broker the harness starts from Maven Central's jars, its proxied links and the typed
client: a real broker, a real Toxiproxy, real clients, no mocks.

The session's broker (the ``kafka_server`` fixture) serves every test here; each uses topics and
groups of its own.  One test starts and stops a broker of its own, to see it leave nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil
import pytest

from harness._errors import ServiceError, ServiceUnavailable, UsageError
from harness.services._kafka import (
    DEFAULT_LINKS,
    ENV_BOOTSTRAP,
    ENV_LINKS,
    KafkaServer,
    start_kafka,
)
from harness.services._kafka_client import (
    KafkaProducer,
    NotDelivered,
    Outgoing,
    read_topic,
)
from harness.services._network import free_port
from harness.services._toxiproxy import Toxic, ToxiproxyServer
from tests.kafka.support import group_reader, unique
from tests.missing import missing


def test_the_broker_runs_from_the_resolved_jars_with_its_links(kafka_server: KafkaServer) -> None:
    if kafka_server.origin in (ENV_BOOTSTRAP, "testcontainers"):
        pytest.skip(f"the broker came from {kafka_server.origin}, not from the jars")
    assert Path(kafka_server.origin).name == "libs"
    assert kafka_server.version == "3.9.1"
    assert len(kafka_server.links) == DEFAULT_LINKS
    listeners = {link.listener for link in kafka_server.links}
    assert len(listeners) == DEFAULT_LINKS
    for link in kafka_server.links:
        proxy = kafka_server.proxy(link)
        assert (proxy.listen, proxy.upstream) == (link.listen, link.upstream)


def test_topics_are_made_with_their_partitions_and_never_by_a_producer(
    kafka_server: KafkaServer,
) -> None:
    admin = kafka_server.admin()
    topic = unique("made")
    admin.create_topic(topic, partitions=3)
    assert topic in admin.topics()
    assert admin.partitions(topic) == 3
    with pytest.raises(ServiceError, match="TOPIC_ALREADY_EXISTS"):
        admin.create_topic(topic, partitions=1)
    absent = unique("never-made")
    with KafkaProducer(kafka_server.bootstrap, timeout=2.0) as producer:
        outcome = producer.send_all(absent, [Outgoing(b"{}")])[0]
    assert isinstance(outcome, NotDelivered)
    assert absent not in admin.topics()  # auto.create.topics.enable=false
    admin.delete_topic(topic)
    admin.delete_topic(topic)  # deleting twice is not an error
    assert topic not in admin.topics()


def test_a_message_is_produced_directly_and_consumed_through_a_link(
    kafka_server: KafkaServer,
) -> None:
    """The client learns the link's proxy as the broker's address from the metadata."""
    topic, group = unique("through-link"), unique("group")
    kafka_server.admin().create_topic(topic, partitions=2)
    with kafka_server.producer() as producer:
        sent = producer.send(topic, Outgoing(b'{"amount": 1}', key=b"k-1",
                                             headers=(("Idempotency-Key", b"k-1"),)))
    with kafka_server.link() as link, group_reader(link.bootstrap, topic, group) as reader:
        brokers = reader.consumer.list_topics(timeout=10).brokers
        assert [f"{b.host}:{b.port}" for b in brokers.values()] == [link.listen]
        [message] = reader.read(1)
    assert (message.partition(), message.offset()) == (sent.partition, sent.offset)
    assert message.headers() == [("Idempotency-Key", b"k-1")]


def test_a_cut_link_cuts_the_consumer_and_no_one_else(
    kafka_server: KafkaServer, toxiproxy_server: ToxiproxyServer,
) -> None:
    """After its bootstrap the consumer talks to the advertised address: if that were the
    broker's own port, disabling the proxy would not stop it reading."""
    topic, group = unique("cut"), unique("group")
    admin = kafka_server.admin()
    admin.create_topic(topic)
    producer = kafka_server.producer()
    with kafka_server.link() as link, group_reader(link.bootstrap, topic, group) as reader:
        producer.send(topic, Outgoing(b"before"))
        assert [m.value() for m in reader.read(1)] == [b"before"]
        proxy = kafka_server.proxy(link)
        with proxy.down():
            producer.send(topic, Outgoing(b"during"))  # the harness's own path still works
            assert reader.nothing_for(2.0) == []
        assert [m.value() for m in reader.read(1, timeout=30)] == [b"during"]
        # A toxic that holds what the broker answers (the fetched messages) stalls it too.
        with proxy.toxic(Toxic("timeout", "downstream", {"timeout": 0})):
            producer.send(topic, Outgoing(b"held"))
            assert reader.nothing_for(1.5) == []
    producer.close()
    assert toxiproxy_server.client.version()


def test_a_group_shows_its_members_and_the_offsets_it_committed(
    kafka_server: KafkaServer,
) -> None:
    topic, group = unique("offsets"), unique("group")
    admin = kafka_server.admin()
    admin.create_topic(topic, partitions=2)
    with kafka_server.producer() as producer:
        for index in range(3):
            producer.send(topic, Outgoing(f"m{index}".encode(), partition=0))
    assert admin.end_offsets(topic) == {0: 3, 1: 0}
    assert admin.committed_offsets(group, topic) == {0: None, 1: None}
    with kafka_server.link() as link, group_reader(link.bootstrap, topic, group,
                                                   **{"client.id": "reader-1"}) as reader:
        reader.read(3)
        reader.commit()
        state = admin.group(group)
        assert state.state == "Stable"
        [member] = state.members
        assert member.client_id == "reader-1"
        assert member.partitions == ((topic, 0), (topic, 1))
        assert admin.committed_offsets(group, topic) == {0: 3, 1: None}
        with pytest.raises(ServiceError):  # offsets cannot move under a live member
            admin.set_offsets(group, topic, {0: 0})
    assert admin.group(group).state == "Empty"
    admin.set_offsets(group, topic, {0: 1})  # a reset to an old offset: messages come again
    assert admin.committed_offsets(group, topic) == {0: 1, 1: None}
    with kafka_server.link() as link, group_reader(link.bootstrap, topic, group) as reader:
        assert [m.value() for m in reader.read(2)] == [b"m1", b"m2"]


def test_a_topic_is_read_back_whole(kafka_server: KafkaServer) -> None:
    topic = unique("read-back")
    kafka_server.admin().create_topic(topic, partitions=2)
    assert read_topic(kafka_server.bootstrap, topic) == []
    with kafka_server.producer() as producer:
        outcomes = producer.send_all(topic, [
            Outgoing(b"a", key=b"1", partition=1), Outgoing(b"b", partition=0,
                                                            headers=(("x-reason", b"poison"),))])
    assert all(not isinstance(outcome, NotDelivered) for outcome in outcomes)
    records = read_topic(kafka_server.bootstrap, topic)
    assert [(r.partition, r.value, r.key) for r in records] == [(0, b"b", None), (1, b"a", b"1")]
    assert records[0].header("X-Reason") == b"poison"


def test_links_are_handed_out_once_each(kafka_server: KafkaServer) -> None:
    taken = [kafka_server.take_link() for _ in range(len(kafka_server.links))]
    try:
        assert len(set(taken)) == len(kafka_server.links)
        with pytest.raises(ServiceError, match="links are taken"):
            kafka_server.take_link()
    finally:
        for link in taken:
            kafka_server.release_link(link)
    proxy = kafka_server.proxy(taken[0])
    proxy.disable()
    proxy.add_toxic(Toxic("latency", "downstream", {"latency": 1000}))
    kafka_server.release_link(taken[0])  # given back clean
    assert proxy.toxics() == []
    with kafka_server.link():
        pass


def test_a_broker_named_in_the_environment_is_used_and_its_links_read(
    kafka_server: KafkaServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_BOOTSTRAP, kafka_server.bootstrap)
    monkeypatch.setenv(ENV_LINKS, "19100:19200, 19101:19201")
    found = start_kafka()
    assert (found.bootstrap, found.origin) == (kafka_server.bootstrap, ENV_BOOTSTRAP)
    assert [(link.broker_port, link.proxy_port) for link in found.links] == [
        (19100, 19200), (19101, 19201)]
    found.stop()  # someone else's broker: left running
    assert kafka_server.admin().topics() is not None
    monkeypatch.setenv(ENV_LINKS, "19100-19200")
    with pytest.raises(UsageError, match="BROKER_PORT:ADVERTISED_PORT"):
        start_kafka()
    monkeypatch.delenv(ENV_LINKS)
    monkeypatch.setenv(ENV_BOOTSTRAP, f"127.0.0.1:{free_port()}")
    with pytest.raises(ServiceUnavailable, match=f"unset {ENV_BOOTSTRAP}"):
        start_kafka()


def test_without_jars_the_error_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.delenv(ENV_BOOTSTRAP, raising=False)
    monkeypatch.setenv("IDEM_KAFKA_LIBS", str(tmp_path))  # no jar there
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(ServiceUnavailable, match="make kafka") as caught:
        start_kafka()
    assert ENV_BOOTSTRAP in str(caught.value)


def test_a_broker_of_its_own_starts_quickly_and_leaves_nothing(
    toxiproxy_server: ToxiproxyServer,
) -> None:
    began = time.monotonic()
    try:
        server = start_kafka(links=2, toxiproxy=toxiproxy_server.client)
    except ServiceUnavailable as exc:
        missing(str(exc))  # a failure under CI, as every missing service
    took = time.monotonic() - began
    if server.origin == ENV_BOOTSTRAP:
        server.stop()
        pytest.skip("a broker from the environment is not started here")
    stopper = server._stopper
    root, pid = stopper.root, stopper._process.pid
    proxies = {server.proxy(link).name for link in server.links}
    assert pid is not None and psutil.pid_exists(pid)
    assert len(server.links) == 2
    server.stop()
    assert not root.exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not proxies & set(toxiproxy_server.client.proxy_names())
    assert took < 60, f"the broker took {took:.1f} s to start"
    print(f"a broker with 2 links started in {took:.2f} s (pid {os.getpid()})")

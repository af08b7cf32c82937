"""The broker service: found or started like PostgreSQL, several throwaway nodes at once, and
nothing left behind."""

from __future__ import annotations

import asyncio
import os

import aio_pika
import aiormq
import psutil
import pytest

from harness._errors import ServiceUnavailable
from harness.services._network import free_port
from harness.services._rabbitmq import RabbitServer, amqp_answers, start_rabbitmq
from tests.reference_consumer.support import publish, queue_depth, unique, until


def _declare(url: str, queue: str) -> None:
    async def declare() -> None:
        connection = await aio_pika.connect(url)
        channel = await connection.channel()
        await channel.declare_queue(queue, durable=True, arguments={"x-queue-type": "quorum"})
        await connection.close()

    asyncio.run(declare())


def _listeners() -> dict[int, int | None]:
    """Listening TCP ports and the process holding each."""
    return {c.laddr[1]: c.pid for c in psutil.net_connections("tcp")
            if c.status == "LISTEN" and c.laddr}


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_second_node_runs_beside_the_first_and_leaves_nothing_behind(
    rabbitmq_server: RabbitServer,
) -> None:
    if os.environ.get("IDEM_AMQP_URL"):
        pytest.skip("IDEM_AMQP_URL names one broker: no throwaway nodes to compare")
    second = start_rabbitmq()
    try:
        assert second.port != rabbitmq_server.port
        queue = unique("two-nodes")
        _declare(second.url, queue)
        publish(second.url, queue, [{"key": "k"}])
        assert queue_depth(second.url, queue) == 1
        with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
            queue_depth(rabbitmq_server.url, queue)  # the nodes share nothing
        node = second._stopper
        assert node is not None
        ports = {node.amqp_port, node.dist_port, node.epmd_port}
        listening = _listeners()
        assert ports <= listening.keys()
        owners = {pid for port in ports if (pid := listening[port]) is not None}
        root = node.root
    finally:
        second.stop()
    # The SIGKILLed group's last members may take a moment to be torn down, and a port number
    # may meanwhile be taken by another test's process: it is the node's processes that must go.
    until("the node's processes ended", lambda: not any(_alive(pid) for pid in owners),
          timeout=10)
    assert not {port for port, pid in _listeners().items() if pid in owners}
    assert not root.exists()
    assert amqp_answers(rabbitmq_server.url, timeout=5) is None  # the first one is untouched


def test_a_given_url_is_used_and_never_stopped(
    rabbitmq_server: RabbitServer, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IDEM_AMQP_URL", rabbitmq_server.url)
    given = start_rabbitmq()
    assert given.origin == "IDEM_AMQP_URL" and given.url == rabbitmq_server.url
    given.stop()
    assert amqp_answers(rabbitmq_server.url, timeout=5) is None


def test_a_given_url_that_does_not_answer_names_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IDEM_AMQP_URL", f"amqp://guest:guest@127.0.0.1:{free_port()}/")
    with pytest.raises(ServiceUnavailable) as caught:
        start_rabbitmq()
    assert "IDEM_AMQP_URL does not accept AMQP connections" in str(caught.value)
    assert "unset IDEM_AMQP_URL" in caught.value.fix

"""``ready = "queue"``: a consumer with no port of its own is ready when the broker counts it on
its queue, and one that never consumes fails its start with the broker's count and the fix.
(The Celery example, tests/consumer/test_celery.py, is the full run of such a consumer.)"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from harness._errors import ServiceUnavailable
from harness.consumer import ConsumerTarget
from harness.consumer._deployment import ConsumerDeployment
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._loader import parse_target

#: A consumer with no port: it consumes the queue it is given through the proxy it is given.
WORKER = textwrap.dedent(
    """
    import asyncio, sys
    import aio_pika

    async def main():
        connection = await aio_pika.connect(sys.argv[1])
        channel = await connection.channel()
        queue = await channel.declare_queue(sys.argv[2], durable=True)
        await queue.consume(lambda message: message.ack())
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def consumer(tmp_path: Path, code: str) -> ConsumerTarget:
    script = tmp_path / "worker.py"
    script.write_text(code)
    target = parse_target({
        "name": "portless", "kind": "consumer",
        "start": {"command": [sys.executable, str(script), "{amqp_url}", "{queue}"],
                  "ready": "queue", "ready_timeout": "20s"},
        "effects": {"kind": "sql", "dsn": f"sqlite:///{tmp_path}/none.db",
                    "query": "select count(*) from sqlite_master where name = %(key)s"},
    }, source=str(tmp_path / "portless.toml"))
    assert isinstance(target, ConsumerTarget)
    return target


def test_a_portless_consumer_is_ready_when_the_broker_counts_it(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with ConsumerDeployment(consumer(tmp_path, WORKER), toxiproxy=toxiproxy_server,
                            broker_url=broker, workdir=tmp_path / "run") as deployment:
        assert deployment.amqp.queue_state(deployment.queue).consumers == 1
        deployment.kill()
        deployment.start_again()  # readiness again after a crash
        assert deployment.amqp.queue_state(deployment.queue).consumers == 1


def test_a_consumer_that_exits_before_consuming_fails_its_start(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    target = consumer(tmp_path, "import sys; sys.exit(3)")
    deployment = ConsumerDeployment(target, toxiproxy=toxiproxy_server, broker_url=broker,
                                    workdir=tmp_path / "run")
    with pytest.raises(ServiceUnavailable) as raised:
        deployment.__enter__()
    message = str(raised.value)
    assert "exited with code 3 before it was consuming" in message
    assert "the broker counts 0 consumer(s)" in message and "{queue}" in message

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
                            broker=broker, workdir=tmp_path / "run") as deployment:
        assert deployment.broker.state().consumers == 1
        deployment.kill()
        deployment.start_again()  # readiness again after a crash
        assert deployment.broker.state().consumers == 1


def test_a_consumer_that_exits_before_consuming_fails_its_start(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    target = consumer(tmp_path, "import sys; sys.exit(3)")
    deployment = ConsumerDeployment(target, toxiproxy=toxiproxy_server, broker=broker,
                                    workdir=tmp_path / "run")
    with pytest.raises(ServiceUnavailable) as raised:
        deployment.__enter__()
    message = str(raised.value)
    assert "exited with code 3 before it was consuming" in message
    assert "the broker counts 0 consumer(s)" in message and "{queue}" in message


#: A consumer with ``ready = "queue"`` that still serves something of its own (its events
#: feed, its hooks) on the ``{port}`` it is given, bound before it consumes.
FEEDING_WORKER = textwrap.dedent(
    """
    import asyncio, sys, threading
    from http.server import BaseHTTPRequestHandler, HTTPServer
    import aio_pika

    class Feed(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"feed")

    server = HTTPServer(("127.0.0.1", int(sys.argv[3])), Feed)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def main():
        connection = await aio_pika.connect(sys.argv[1])
        channel = await connection.channel()
        queue = await channel.declare_queue(sys.argv[2], durable=True)
        await queue.consume(lambda message: message.ack())
        await asyncio.Event().wait()

    asyncio.run(main())
    """
)


def test_the_harness_never_binds_the_port_it_hands_to_a_queue_ready_consumer(
        broker: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38, item 13: with ``ready = "queue"`` the harness bound ``{port}`` itself to
    signal readiness, while the consumer served its feed there: "Address already in use" in a
    harness thread, once per start."""
    import threading
    import urllib.request

    died: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: died.append(args.exc_value))
    target = consumer(tmp_path, FEEDING_WORKER)
    target = target.model_copy(update={"start": target.start.model_copy(update={
        "command": [*target.start.command, "{port}"]})})
    with ConsumerDeployment(target, toxiproxy=toxiproxy_server, broker=broker,
                            workdir=tmp_path / "run") as deployment:
        port = deployment.instances[0].port
        for _ in range(2):  # the first start, and one after a crash
            assert deployment.broker.state().consumers == 1
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
                assert answer.read() == b"feed"
            deployment.kill()
            deployment.start_again()
    assert died == [], died

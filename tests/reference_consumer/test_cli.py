"""The consume command: a bad flag is a usage error (exit 2) naming the option and its fix,
before anything connects; a broker that cannot be reached, or that holds the queue with other
arguments, is exit 3 with the reason and the fix, no traceback."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aio_pika
import pytest
from click.testing import CliRunner

from harness.services._network import free_port
from harness.services._rabbitmq import RabbitServer
from reference_server.consumer.cli import consume
from tests.reference_consumer.support import unique


@pytest.mark.parametrize(("flags", "says"), [
    (["--amqp-url", "http://127.0.0.1:5672/"], "not an AMQP URL"),
    (["--amqp-url", "amqp://guest:guest@10.1.2.3:5672/"], "--allow-remote"),
    (["--queue", "amq.mine"], "reserved"),
    (["--flaw", "nope"], "choose one of: ack-before-work"),
    (["--lease", "soon"], "not a duration"),
    (["--prefetch", "0"], "--prefetch"),
    (["--max-attempts", "0"], "--max-attempts"),
    (["--dead-letter-queue", "q"], "must differ from --queue"),
    (["--store", "sqlite://relative.db"], "absolute path"),
])
def test_a_bad_flag_is_a_usage_error_that_names_the_fix(
    flags: list[str], says: str, tmp_path: Path,
) -> None:
    defaults = {"--amqp-url": "amqp://guest:guest@127.0.0.1:5672/", "--queue": "q",
                "--store": f"sqlite:///{tmp_path / 'store.sqlite3'}"}
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        defaults[flag] = value
    args = [part for pair in defaults.items() for part in pair]
    result = CliRunner().invoke(consume, args)
    assert result.exit_code == 2, result.output
    assert says in result.output
    assert "Traceback" not in result.output


def test_an_unreachable_broker_exits_3_with_the_reason(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reference_server", "consume",
         "--amqp-url", f"amqp://guest:secret@127.0.0.1:{free_port()}/", "--queue", "q",
         "--store", f"sqlite:///{tmp_path / 'store.sqlite3'}", "--connect-timeout", "1s"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert "cannot be reached" in result.stderr and "--amqp-url" in result.stderr
    assert "secret" not in result.stderr  # the password is not printed
    assert "Traceback" not in result.stderr


def test_a_queue_declared_otherwise_exits_3_with_the_fix(
    rabbitmq_server: RabbitServer, tmp_path: Path,
) -> None:
    queue = unique("classic")

    async def declare_classic() -> None:
        connection = await aio_pika.connect(rabbitmq_server.url)
        channel = await connection.channel()
        await channel.declare_queue(queue, durable=True)
        await connection.close()

    asyncio.run(declare_classic())
    result = subprocess.run(
        [sys.executable, "-m", "reference_server", "consume", "--amqp-url", rabbitmq_server.url,
         "--queue", queue, "--store", f"sqlite:///{tmp_path / 'store.sqlite3'}"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 3
    assert "refused the queues" in result.stderr
    assert "delete it, or use other names" in result.stderr
    assert "Traceback" not in result.stderr

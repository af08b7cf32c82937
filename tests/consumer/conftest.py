"""Consumer tests share the session's broker: every run is pointed at it through
``IDEM_AMQP_URL``, as a user with a running broker would do, instead of booting a node each."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from harness.services._rabbitmq import RabbitServer


@pytest.fixture(scope="module")
def broker(rabbitmq_server: RabbitServer) -> Iterator[str]:
    saved = os.environ.get("IDEM_AMQP_URL")
    os.environ["IDEM_AMQP_URL"] = rabbitmq_server.url
    try:
        yield rabbitmq_server.url
    finally:
        if saved is None:
            os.environ.pop("IDEM_AMQP_URL", None)
        else:
            os.environ["IDEM_AMQP_URL"] = saved

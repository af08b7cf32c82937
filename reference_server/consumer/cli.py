"""``python -m reference_server consume``: the reference consumer's click command.

Like ``serve``, the command only parses and checks options, then hands a ``ConsumerSettings`` to
the runner; a bad value is a usage error naming the option and the accepted forms, before
anything connects.  The worker's options (store, dedup window, retries, hooks, flaws) are the
ones ``consume-kafka`` takes too (``_options.py``); here are RabbitMQ's own.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import click

from harness.services._network import is_loopback
from reference_server._durations import Duration
from reference_server.consumer._options import worker_options, worker_settings
from reference_server.consumer._running import run_consumer
from reference_server.consumer._settings import ConsumerSettings
from reference_server.consumer.flaws import CONSUMER_FLAWS, consumer_flaws_named

__all__ = ["consume"]

_MAX_QUEUE_NAME = 255


def _check_queue(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if not value or len(value.encode("utf-8")) > _MAX_QUEUE_NAME:
        raise click.BadParameter(f"a queue name is 1 to {_MAX_QUEUE_NAME} bytes")
    if value.startswith("amq."):
        raise click.BadParameter("names starting with amq. are reserved by the broker")
    return value


def _check_amqp_url(url: str, allow_remote: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("amqp", "amqps") or not parts.hostname:
        raise click.BadParameter(
            f"{url!r} is not an AMQP URL; write amqp://USER:PASSWORD@127.0.0.1:5672/",
            param_hint="--amqp-url")
    try:
        parts.port  # noqa: B018 - a malformed port raises here, not at connect time
    except ValueError:
        raise click.BadParameter(f"{url!r} has a malformed port", param_hint="--amqp-url") from None
    if not allow_remote and not is_loopback(parts.hostname):
        raise click.BadParameter(
            f"{parts.hostname} is not a loopback address; pass --allow-remote to use it",
            param_hint="--amqp-url")


@click.command(name="consume", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--amqp-url", required=True, metavar="URL",
              help="The broker, e.g. amqp://guest:guest@127.0.0.1:5672/ (loopback only unless "
                   "--allow-remote).")
@click.option("--queue", required=True, callback=_check_queue,
              help="The queue to consume (declared durable, as a quorum queue).")
@click.option("--dead-letter-queue", metavar="NAME", callback=_check_queue,
              help="Where poison goes (declared too).  [default: QUEUE.dead]")
@click.option("--prefetch", type=click.IntRange(1, 1000), default=8, show_default=True,
              help="Deliveries processed at once.")
@click.option("--heartbeat", type=Duration(), default="5s", show_default=True,
              help="AMQP heartbeat: how soon the broker notices a stalled consumer.")
@worker_options(thing="message", flaw_names=list(CONSUMER_FLAWS), combine=consumer_flaws_named,
                helps={"--dedup-header": "The message header holding the client's dedup key "
                                         "(else the message id)."})
def consume(amqp_url: str, queue: str, dead_letter_queue: str | None, prefetch: int,
            heartbeat: float, allow_remote: bool, **worker: Any) -> None:
    """Run the reference consumer: charge messages from a queue, deduplicated by their key."""
    _check_amqp_url(amqp_url, allow_remote)
    if dead_letter_queue == queue:
        raise click.BadParameter("the dead-letter queue must differ from --queue",
                                 param_hint="--dead-letter-queue")
    run_consumer(ConsumerSettings(
        amqp_url=amqp_url,
        queue=queue,
        dead_letter_queue=dead_letter_queue or "",
        prefetch=prefetch,
        heartbeat=heartbeat,
        **worker_settings(**worker),
    ))

"""``python -m reference_server consume``: the reference consumer's click command.

Like ``serve``, the command only parses and checks options, then hands a ``ConsumerSettings`` to
the runner; a bad value is a usage error naming the option and the accepted forms, before
anything connects.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import click

from harness.services._network import is_loopback
from reference_server._durations import Duration
from reference_server._options import checked_flaws
from reference_server.consumer._running import run_consumer
from reference_server.consumer._settings import ConsumerSettings
from reference_server.consumer.flaws import CONSUMER_FLAWS, consumer_flaws_named
from reference_server.stores import StoreUrlError, check_store_url

__all__ = ["consume"]

_LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]
_MAX_QUEUE_NAME = 255


def _default_store() -> str:
    from harness.services._paths import state_dir

    return f"sqlite:///{state_dir() / 'reference-consumer.sqlite3'}"


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
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback broker.")
@click.option("--store", "store_url", metavar="URL",
              help="sqlite:///ABSOLUTE/PATH or postgresql://USER@HOST:PORT/DB, the same ledger "
                   "the HTTP server writes [default: reference-consumer.sqlite3 in the state "
                   "directory]")
@click.option("--dedup-header", default="Idempotency-Key", show_default=True,
              help="The message header holding the client's dedup key (else the message id).")
@click.option("--prefetch", type=click.IntRange(1, 1000), default=8, show_default=True,
              help="Deliveries processed at once.")
@click.option("--lease", type=Duration(), default="30s", show_default=True,
              help="How long a claim holds a key before another consumer may take it over.")
@click.option("--retention", type=Duration(), default="24h", show_default=True,
              help="The dedup window: how long a finished key is remembered.")
@click.option("--max-attempts", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Deliveries of a message without an outcome before it is dead-lettered.")
@click.option("--requeue-delay", type=Duration(), default="250ms", show_default=True,
              help="Wait before a requeue, and between looks at a key another consumer holds.")
@click.option("--cleanup-interval", type=Duration(), default="60s", show_default=True,
              help="How often expired keys are deleted.")
@click.option("--work-delay-ms", type=click.IntRange(0, 600_000), default=0, show_default=True,
              help="Simulated payment-provider latency inside each job.")
@click.option("--heartbeat", type=Duration(), default="5s", show_default=True,
              help="AMQP heartbeat: how soon the broker notices a stalled consumer.")
@click.option("--connect-timeout", type=Duration(), default="15s", show_default=True,
              help="How long to retry the first connection to the broker before exiting 3.")
@click.option("--admin-port", type=click.IntRange(1, 65535),
              help="Serve the admin routes (/_admin/health, effects, keys, cleanup, events, "
                   "clock) on this loopback port.")
@click.option("--test-clock", is_flag=True,
              help="Let POST /_admin/clock/advance move the consumer's clock.")
@click.option("--test-faults", is_flag=True,
              help="Honour the X-Test-Pause and X-Test-Fault message headers.")
@click.option("--flaw", "flaws", metavar="NAME", multiple=True,
              callback=checked_flaws(consumer_flaws_named),
              help=f"Run with a named flaw (repeat for several): {', '.join(CONSUMER_FLAWS)}.")
@click.option("--log-level", type=click.Choice(_LOG_LEVELS), default="info", show_default=True)
def consume(
    amqp_url: str, queue: str, dead_letter_queue: str | None, allow_remote: bool,
    store_url: str | None, dedup_header: str, prefetch: int, lease: float, retention: float,
    max_attempts: int, requeue_delay: float, cleanup_interval: float, work_delay_ms: int,
    heartbeat: float, connect_timeout: float, admin_port: int | None, test_clock: bool,
    test_faults: bool, flaws: tuple[str, ...], log_level: str,
) -> None:
    """Run the reference consumer: charge messages from a queue, deduplicated by their key."""
    _check_amqp_url(amqp_url, allow_remote)
    if not dedup_header.strip() or not dedup_header.isascii():
        raise click.BadParameter("name an ASCII header, such as Idempotency-Key",
                                 param_hint="--dedup-header")
    if dead_letter_queue == queue:
        raise click.BadParameter("the dead-letter queue must differ from --queue",
                                 param_hint="--dead-letter-queue")
    url = store_url or _default_store()
    try:
        check_store_url(url)
    except StoreUrlError as exc:
        raise click.BadParameter(str(exc), param_hint="--store") from exc
    run_consumer(ConsumerSettings(
        amqp_url=amqp_url,
        queue=queue,
        store_url=url,
        dead_letter_queue=dead_letter_queue or "",
        dedup_header=dedup_header.strip(),
        prefetch=prefetch,
        lease=lease,
        retention=retention,
        max_attempts=max_attempts,
        requeue_delay=requeue_delay,
        cleanup_interval=cleanup_interval,
        work_delay=work_delay_ms / 1000,
        heartbeat=heartbeat,
        connect_timeout=connect_timeout,
        admin_port=admin_port,
        test_clock=test_clock,
        test_faults=test_faults,
        flaws=flaws,
        log_level=log_level,
    ))

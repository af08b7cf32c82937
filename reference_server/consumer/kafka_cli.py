"""``python -m reference_server consume-kafka``: the reference consumer on a Kafka topic.

The same consumer as ``consume`` (the same worker, store, events feed, admin routes and test
hooks) with Kafka as its broker: a member of consumer group ``--group`` reading ``--topic``,
committing each record's offset after its work.  As for ``consume``, the command only parses and
checks options: a bad value is a usage error naming the option and the accepted forms, before
anything connects.
"""

from __future__ import annotations

import re
from typing import Literal, cast

import click

from harness.services._network import is_loopback
from reference_server._durations import Duration
from reference_server._options import checked_flaws
from reference_server.consumer._running import run_consumer
from reference_server.consumer._settings import ConsumerSettings
from reference_server.consumer.cli import _default_store
from reference_server.consumer.flaws import KAFKA_CONSUMER_FLAWS, kafka_consumer_flaws_named
from reference_server.stores import StoreUrlError, check_store_url

__all__ = ["consume_kafka"]

_LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")


def _check_topic(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return None
    if not _TOPIC.fullmatch(value) or value in (".", ".."):
        raise click.BadParameter("a Kafka topic is 1 to 249 of the characters A-Z a-z 0-9 . _ -")
    return value


def _check_bootstrap(bootstrap: str, allow_remote: bool) -> None:
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise click.BadParameter(
                f"{address!r} is not HOST:PORT; write e.g. 127.0.0.1:9092 (several: commas)",
                param_hint="--bootstrap")
        if not allow_remote and not is_loopback(host):
            raise click.BadParameter(
                f"{host} is not a loopback address; pass --allow-remote to use it",
                param_hint="--bootstrap")


@click.command(name="consume-kafka", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--bootstrap", required=True, metavar="HOST:PORT",
              help="The broker's bootstrap address, e.g. 127.0.0.1:9092 (loopback only unless "
                   "--allow-remote).")
@click.option("--topic", required=True, callback=_check_topic,
              help="The topic to read (it must exist: the consumer does not create it).")
@click.option("--group", required=True, help="The consumer group to read it in.")
@click.option("--dead-letter-topic", metavar="NAME", callback=_check_topic,
              help="Where poison goes (made when absent, one partition).  [default: TOPIC.dead]")
@click.option("--allow-remote", is_flag=True, help="Allow a non-loopback broker.")
@click.option("--store", "store_url", metavar="URL",
              help="sqlite:///ABSOLUTE/PATH or postgresql://USER@HOST:PORT/DB, the same ledger "
                   "the HTTP server writes [default: reference-consumer.sqlite3 in the state "
                   "directory]")
@click.option("--dedup", "dedup_source", type=click.Choice(["header", "key", "body"]),
              default="header", show_default=True,
              help="Where the client's dedup key is: a header (--dedup-header), the record's "
                   "key, or a field of the JSON body (--dedup-field).")
@click.option("--dedup-header", default="Idempotency-Key", show_default=True,
              help="The header holding the dedup key, with --dedup header.")
@click.option("--dedup-field", default="key", show_default=True,
              help="The top-level body field holding the dedup key, with --dedup body.")
@click.option("--lease", type=Duration(), default="30s", show_default=True,
              help="How long a claim holds a key before another consumer may take it over.")
@click.option("--retention", type=Duration(), default="24h", show_default=True,
              help="The dedup window: how long a finished key is remembered.")
@click.option("--max-attempts", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="Deliveries of a failing record (in this process) before it is "
                   "dead-lettered.")
@click.option("--requeue-delay", type=Duration(), default="250ms", show_default=True,
              help="Wait before reading a failed record again, and between looks at a key "
                   "another consumer holds.")
@click.option("--cleanup-interval", type=Duration(), default="60s", show_default=True,
              help="How often expired keys are deleted.")
@click.option("--work-delay-ms", type=click.IntRange(0, 600_000), default=0, show_default=True,
              help="Simulated payment-provider latency inside each job.")
@click.option("--session-timeout", type=Duration(), default="10s", show_default=True,
              help="session.timeout.ms: a member without heartbeats this long (killed, cut off) "
                   "is dropped from the group.")
@click.option("--max-poll-interval", type=Duration(), default="300s", show_default=True,
              help="max.poll.interval.ms: a member that does not poll this long (a job paused "
                   "past it) leaves the group, and its partitions go to another member.")
@click.option("--auto-commit-interval", type=Duration(), default="100ms", show_default=True,
              help="auto.commit.interval.ms, used by the auto-commit-before-work flaw only.")
@click.option("--connect-timeout", type=Duration(), default="15s", show_default=True,
              help="How long to wait for the broker and the first partition assignment before "
                   "exiting 3.")
@click.option("--admin-port", type=click.IntRange(1, 65535),
              help="Serve the admin routes (/_admin/health, effects, keys, cleanup, events, "
                   "clock) on this loopback port.")
@click.option("--test-clock", is_flag=True,
              help="Let POST /_admin/clock/advance move the consumer's clock.")
@click.option("--test-faults", is_flag=True,
              help="Honour the X-Test-Pause and X-Test-Fault record headers.")
@click.option("--flaw", "flaws", metavar="NAME", multiple=True,
              callback=checked_flaws(kafka_consumer_flaws_named),
              help=f"Run with a named flaw (repeat for several): "
                   f"{', '.join(KAFKA_CONSUMER_FLAWS)}.")
@click.option("--log-level", type=click.Choice(_LOG_LEVELS), default="info", show_default=True)
def consume_kafka(
    bootstrap: str, topic: str, group: str, dead_letter_topic: str | None, allow_remote: bool,
    store_url: str | None, dedup_source: str, dedup_header: str, dedup_field: str,
    lease: float, retention: float, max_attempts: int, requeue_delay: float,
    cleanup_interval: float, work_delay_ms: int, session_timeout: float,
    max_poll_interval: float, auto_commit_interval: float, connect_timeout: float,
    admin_port: int | None, test_clock: bool, test_faults: bool, flaws: tuple[str, ...],
    log_level: str,
) -> None:
    """Run the reference consumer on a Kafka topic: charge records, deduplicated by their key."""
    _check_bootstrap(bootstrap, allow_remote)
    if not group.strip():
        raise click.BadParameter("name a consumer group", param_hint="--group")
    if dead_letter_topic == topic:
        raise click.BadParameter("the dead-letter topic must differ from --topic",
                                 param_hint="--dead-letter-topic")
    if not dedup_header.strip() or not dedup_header.isascii():
        raise click.BadParameter("name an ASCII header, such as Idempotency-Key",
                                 param_hint="--dedup-header")
    if not dedup_field.strip():
        raise click.BadParameter("name a body field, such as key", param_hint="--dedup-field")
    if not 0.5 <= session_timeout <= 3600:
        raise click.BadParameter("from 500ms to 1h (the broker bounds it too: "
                                 "group.min.session.timeout.ms)", param_hint="--session-timeout")
    if max_poll_interval < session_timeout:
        raise click.BadParameter(
            f"must be at least --session-timeout ({session_timeout:g} s): the client refuses a "
            "poll interval shorter than the session", param_hint="--max-poll-interval")
    url = store_url or _default_store()
    try:
        check_store_url(url)
    except StoreUrlError as exc:
        raise click.BadParameter(str(exc), param_hint="--store") from exc
    run_consumer(ConsumerSettings(
        amqp_url="",
        queue=topic,
        store_url=url,
        dead_letter_queue=dead_letter_topic or "",
        dedup_header=dedup_header.strip(),
        prefetch=1,
        lease=lease,
        retention=retention,
        max_attempts=max_attempts,
        requeue_delay=requeue_delay,
        cleanup_interval=cleanup_interval,
        work_delay=work_delay_ms / 1000,
        connect_timeout=connect_timeout,
        admin_port=admin_port,
        test_clock=test_clock,
        test_faults=test_faults,
        flaws=flaws,
        log_level=log_level,
        broker="kafka",
        bootstrap=bootstrap,
        group=group.strip(),
        dedup_source=cast(Literal["header", "key", "body"], dedup_source),
        dedup_field=dedup_field.strip(),
        max_poll_interval=max_poll_interval,
        session_timeout=session_timeout,
        auto_commit_interval=auto_commit_interval,
    ))

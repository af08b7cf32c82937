"""``python -m reference_server consume-kafka``: the reference consumer on a Kafka topic.

The same consumer as ``consume`` (the same worker, store, events feed, admin routes and test
hooks) with Kafka as its broker: a member of consumer group ``--group`` reading ``--topic``,
committing each record's offset after its work.  As for ``consume``, the command only parses and
checks options: a bad value is a usage error naming the option and the accepted forms, before
anything connects.  The worker's options are ``consume``'s (``_options.py``); here are Kafka's
own.
"""

from __future__ import annotations

import re
from typing import Any, Literal, cast

import click

from harness.services._network import is_loopback
from reference_server._durations import Duration
from reference_server.consumer._options import worker_options, worker_settings
from reference_server.consumer._running import run_consumer
from reference_server.consumer._settings import ConsumerSettings
from reference_server.consumer.flaws import KAFKA_CONSUMER_FLAWS, kafka_consumer_flaws_named

__all__ = ["consume_kafka"]

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
@click.option("--dedup", "dedup_source", type=click.Choice(["header", "key", "body"]),
              default="header", show_default=True,
              help="Where the client's dedup key is: a header (--dedup-header), the record's "
                   "key, or a field of the JSON body (--dedup-field).")
@click.option("--dedup-field", default="key", show_default=True,
              help="The top-level body field holding the dedup key, with --dedup body.")
@click.option("--session-timeout", type=Duration(), default="10s", show_default=True,
              help="session.timeout.ms: a member without heartbeats this long (killed, cut off) "
                   "is dropped from the group.")
@click.option("--max-poll-interval", type=Duration(), default="300s", show_default=True,
              help="max.poll.interval.ms: a member that does not poll this long (a job paused "
                   "past it) leaves the group, and its partitions go to another member.")
@click.option("--auto-commit-interval", type=Duration(), default="100ms", show_default=True,
              help="auto.commit.interval.ms, used by the auto-commit-before-work flaw only.")
@worker_options(
    thing="record", flaw_names=list(KAFKA_CONSUMER_FLAWS), combine=kafka_consumer_flaws_named,
    helps={"--dedup-header": "The header holding the dedup key, with --dedup header.",
           "--max-attempts": "Deliveries of a failing record (in this process) before it is "
                             "dead-lettered.",
           "--requeue-delay": "Wait before reading a failed record again, and between looks at "
                              "a key another consumer holds.",
           "--connect-timeout": "How long to wait for the broker and the first partition "
                                "assignment before exiting 3."})
def consume_kafka(bootstrap: str, topic: str, group: str, dead_letter_topic: str | None,
                  dedup_source: str, dedup_field: str, session_timeout: float,
                  max_poll_interval: float, auto_commit_interval: float, allow_remote: bool,
                  **worker: Any) -> None:
    """Run the reference consumer on a Kafka topic: charge records, deduplicated by their key."""
    _check_bootstrap(bootstrap, allow_remote)
    if not group.strip():
        raise click.BadParameter("name a consumer group", param_hint="--group")
    if dead_letter_topic == topic:
        raise click.BadParameter("the dead-letter topic must differ from --topic",
                                 param_hint="--dead-letter-topic")
    if not dedup_field.strip():
        raise click.BadParameter("name a body field, such as key", param_hint="--dedup-field")
    if not 0.5 <= session_timeout <= 3600:
        raise click.BadParameter("from 500ms to 1h (the broker bounds it too: "
                                 "group.min.session.timeout.ms)", param_hint="--session-timeout")
    if max_poll_interval < session_timeout:
        raise click.BadParameter(
            f"must be at least --session-timeout ({session_timeout:g} s): the client refuses a "
            "poll interval shorter than the session", param_hint="--max-poll-interval")
    run_consumer(ConsumerSettings(
        amqp_url="",
        queue=topic,
        dead_letter_queue=dead_letter_topic or "",
        prefetch=1,
        broker="kafka",
        bootstrap=bootstrap,
        group=group.strip(),
        dedup_source=cast(Literal["header", "key", "body"], dedup_source),
        dedup_field=dedup_field.strip(),
        max_poll_interval=max_poll_interval,
        session_timeout=session_timeout,
        auto_commit_interval=auto_commit_interval,
        **worker_settings(**worker),
    ))

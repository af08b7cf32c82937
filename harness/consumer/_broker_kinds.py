"""What only one broker's target files may say: RabbitMQ's tables and fields, and Kafka's.

One consumer target file describes a consumer of either broker (``[broker] kind``).  Most of it
means the same on both (the start command, the message body, the effects, the hooks, the
dedup window), but some of it belongs to one broker only: a queue, an exchange, AMQP properties
and message ids to RabbitMQ; a topic, its partitions and group, a record key, offset commits
and a session timeout to Kafka.  A file that names the other broker's part would be judged
against something its consumer never reads, so it is refused, naming what to write instead.
A saved target keeps only its own broker's part, so a RabbitMQ target reads as it did before
Kafka came (``without_the_other_broker``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness._target import placeholders

if TYPE_CHECKING:
    from harness.consumer._target import ConsumerTarget

__all__ = ["KAFKA_START_PLACEHOLDERS", "RABBITMQ_START_PLACEHOLDERS", "check_fits",
           "without_the_other_broker"]

#: What the start command (and env) of each broker's consumer may use beside the common
#: ``{python}``, ``{workdir}``, ``{port}``, ``{instance}``, ``{run}`` and ``{recorder_url}``.
RABBITMQ_START_PLACEHOLDERS = ("amqp_url", "queue", "dead_letter_queue")
KAFKA_START_PLACEHOLDERS = ("kafka_bootstrap", "topic", "group", "dead_letter_topic",
                            "session_timeout_ms", "max_poll_interval_ms")
#: Each broker's placeholder the other's start command might be written with, and what to use.
_KAFKA_INSTEAD = {"amqp_url": "{kafka_bootstrap}", "queue": "{topic}",
                  "dead_letter_queue": "{dead_letter_topic}"}
_RABBITMQ_INSTEAD = {"kafka_bootstrap": "{amqp_url}", "topic": "{queue}", "group": "nothing",
                     "dead_letter_topic": "{dead_letter_queue}",
                     "session_timeout_ms": "nothing", "max_poll_interval_ms": "nothing"}

#: What a saved target of each broker leaves out: the other broker's tables and fields.
_OTHERS: dict[str, dict[str, tuple[str, ...] | None]] = {
    "rabbitmq": {"topic": None, "broker": ("kind", "bootstrap", "session_timeout",
                                           "max_poll_interval"),
                 "message": ("key",), "promises": ("commit", "dead_letter_topic")},
    "kafka": {"queue": None, "broker": ("url",),
              "message": ("properties", "message_id", "content_type"),
              "promises": ("ack", "dead_letter_queue")},
}


def without_the_other_broker(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """``data`` (a dumped target) without the tables and fields of the other broker."""
    for table, fields in _OTHERS[kind].items():
        if fields is None:
            data.pop(table, None)
        elif isinstance(data.get(table), dict):
            data[table] = {k: v for k, v in data[table].items() if k not in fields}
    return data


def check_fits(target: ConsumerTarget) -> None:
    """Refuse what the target's file says that belongs to the other broker (``ValueError``
    naming what to write instead)."""
    problems = _kafka_problems(target) if target.kafka else _rabbitmq_problems(target)
    if problems:
        raise ValueError("; ".join(problems))


def _start_words(target: ConsumerTarget) -> list[str]:
    return placeholders([*target.start.command, *target.start.env.values()])


def _kafka_problems(target: ConsumerTarget) -> list[str]:
    problems: list[str] = []
    used = _start_words(target)
    broker, message, promises = target.broker, target.message, target.promises
    if target.queue != type(target.queue)():  # a [queue] table written, not the default
        problems.append("[queue] is RabbitMQ's: on Kafka write [topic] (name, partitions, "
                        "group, dead_letter_topic)")
    if "kafka_bootstrap" not in used:
        problems.append("the command (or env) must use {kafka_bootstrap}: each Kafka consumer "
                        "process reaches the broker through a proxied link of its own")
    wrong = [name for name in _KAFKA_INSTEAD if name in used]
    if wrong:
        problems.append("the command uses " + ", ".join(
            f"{{{name}}} (write {_KAFKA_INSTEAD[name]})" for name in wrong)
                        + ": those are RabbitMQ's")
    if "session_timeout_ms" in used and broker.session_timeout is None:
        problems.append("the command uses {session_timeout_ms}: give [broker] "
                        "session_timeout = \"2s\" (how soon a killed member leaves the group)")
    if "max_poll_interval_ms" in used and broker.max_poll_interval is None:
        problems.append("the command uses {max_poll_interval_ms}: give [broker] "
                        "max_poll_interval = \"5s\" (what a job that does not poll outlives)")
    if target.start.ready == "queue":
        problems.append("ready = \"queue\" is RabbitMQ's: on Kafka write ready = \"group\" (the "
                        "member is in the group with its partitions) or \"http\"")
    defaults = type(message)()
    if message.properties:
        problems.append("[message] properties are AMQP's: a Kafka record has headers "
                        "(write them in [message] headers)")
    if message.message_id != defaults.message_id:
        problems.append("a Kafka record has no message id: leave [message] message_id out")
    if message.content_type != defaults.content_type:
        problems.append("a Kafka record has no content type: put it in [message] headers")
    if message.dedup == "message-id":
        problems.append("a Kafka record has no message id to deduplicate on: write dedup = "
                        "\"key\" (the record key), \"header\" or \"body\"")
    if promises.ack != type(promises)().ack:
        problems.append("ack is RabbitMQ's: on Kafka write commit = \"after-work\", "
                        "\"before-work\" or \"auto\" in [promises]")
    if promises.dead_letter_queue is not None:
        problems.append("dead_letter_queue is RabbitMQ's: on Kafka write dead_letter_topic")
    if promises.on_failure in ("requeue", "republish"):
        problems.append(f"on_failure = \"{promises.on_failure}\" is RabbitMQ's: on Kafka write "
                        "\"retry\" (the record read again) or \"dead-letter\"")
    topic_dlt = target.topic.dead_letter_topic
    if promises.dead_letter_topic and topic_dlt and promises.dead_letter_topic != topic_dlt:
        problems.append(f"[promises] dead_letter_topic {promises.dead_letter_topic!r} and "
                        f"[topic] dead_letter_topic {topic_dlt!r} differ: name one topic")
    pause = target.hooks.pause
    if pause is not None and "before-ack" in pause.points:
        problems.append("the pause point before-ack is RabbitMQ's: on Kafka write "
                        "before-commit (the work done, the offset not committed)")
    if pause is not None and pause.deliveries == "first":
        problems.append("Kafka counts no deliveries, so a record read again by another process "
                        "looks new to it: write [hooks.pause] deliveries = \"every-process\" (or "
                        "\"every\")")
    return problems


def _rabbitmq_problems(target: ConsumerTarget) -> list[str]:
    problems: list[str] = []
    used = _start_words(target)
    if target.topic != type(target.topic)():  # a [topic] table written, not the default
        problems.append("[topic] is Kafka's: add [broker] kind = \"kafka\", or write [queue] "
                        "for RabbitMQ")
    wrong = [name for name in _RABBITMQ_INSTEAD if name in used]
    if wrong:
        problems.append("the command uses " + ", ".join(f"{{{name}}}" for name in wrong)
                        + ": those are Kafka's; add [broker] kind = \"kafka\", or use "
                        + ", ".join(sorted({_RABBITMQ_INSTEAD[n] for n in wrong} - {"nothing"})
                                    or ["{amqp_url}"]))
    if "amqp_url" not in used and "kafka_bootstrap" not in used:
        problems.append("the command (or env) must use {amqp_url}: the consumer has to reach "
                        "the broker through the address the harness gives it")
    if target.start.ready == "group":
        problems.append("ready = \"group\" is Kafka's: on RabbitMQ write ready = \"queue\"")
    if target.message.key is not None:
        problems.append("[message] key is a Kafka record's key: add [broker] kind = \"kafka\", "
                        "or leave it out (RabbitMQ routes by [queue] routing_key)")
    if target.message.dedup == "key":
        problems.append("dedup = \"key\" is a Kafka record's key: on RabbitMQ write \"header\", "
                        "\"message-id\" or \"body\"")
    promises = target.promises
    if promises.commit is not None:
        problems.append("commit is Kafka's: on RabbitMQ write ack = \"after-work\" or "
                        "\"before-work\"")
    if promises.dead_letter_topic is not None:
        problems.append("dead_letter_topic is Kafka's: on RabbitMQ write dead_letter_queue")
    if promises.on_failure == "retry":
        problems.append("on_failure = \"retry\" is Kafka's: on RabbitMQ write \"requeue\", "
                        "\"republish\" or \"dead-letter\"")
    pause = target.hooks.pause
    if pause is not None and "before-commit" in pause.points:
        problems.append("the pause point before-commit is Kafka's: on RabbitMQ write "
                        "before-ack")
    if pause is not None and pause.deliveries == "every-process":
        problems.append("deliveries = \"every-process\" is Kafka's: RabbitMQ marks a "
                        "redelivery, so write \"first\" or \"every\"")
    return problems

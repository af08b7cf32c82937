"""A queue consumer's target file: the HTTP model's tables extended, and four of its own.

A queue consumer is described by the same kind of TOML file as an HTTP service, with ``kind =
"consumer"`` (or a ``[queue]`` or ``[topic]`` table) and four tables of its own: ``[broker]``,
``[queue]`` (RabbitMQ) or ``[topic]`` (Kafka, ``[broker] kind = "kafka"``), ``[message]`` and
consumer ``[promises]``.  Reading a file of either kind is ``harness/targets/_loader.py``'s job;
what only one broker's files may say is checked in ``_broker_kinds.py``.

A ``ConsumerTarget`` is a ``Target``: the runner, the reports, the matrix and ``check`` carry it
like any other, and the checker reads its promises.  The HTTP-only tables (``[endpoint]``,
``[key]``, ``[tenant]``...) are refused with the table to use instead, because a consumer that
silently ignored them would be judged against promises its author never meant.  The format is
documented in docs/consumers.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from harness._durations import parse_duration
from harness._target import (
    Duration,
    Hooks,
    Promises,
    Start,
    Target,
    _Section,
    placeholders,
)

__all__ = [
    "ACK_POLICIES",
    "BROKER_CAPABILITIES",
    "MESSAGE_PLACEHOLDERS",
    "BrokerKind",
    "BrokerSpec",
    "ConsumerHooks",
    "ConsumerPromises",
    "ConsumerStart",
    "ConsumerTarget",
    "DedupLocation",
    "MessageSpec",
    "PauseHook",
    "QueueSpec",
    "TestHook",
    "TopicSpec",
    "WorkFailure",
    "is_consumer",
    "place_in_body",
]

DedupLocation = Literal["header", "message-id", "body", "key"]
ACK_POLICIES = ("after-work", "before-work")
#: The brokers a consumer target may read from (``[broker] kind``).
BrokerKind = Literal["rabbitmq", "kafka"]
#: The capabilities only one kind of broker can give (``BrokerSpec.capabilities``): a scenario
#: that needs one is for that broker's consumers only.
BROKER_CAPABILITIES: dict[str, frozenset[str]] = {
    "rabbitmq": frozenset({"ack-hold"}),
    "kafka": frozenset({"offsets", "partitions", "poll-interval"}),
}
#: What a test hook applies to: a message's first delivery only (its redelivered flag unset),
#: every delivery of it, or (Kafka, which counts no deliveries) the first delivery in each
#: consumer process: a record read again by another process looks new to it.
Deliveries = Literal["first", "every", "every-process"]
#: The placeholders ``[message]`` may use, and what each becomes.
MESSAGE_PLACEHOLDERS = {
    "key": "the dedup key the harness chose for the job",
    "amount": "a random amount, the same for every message of one job",
    "nonce": "a random word, the same for every message of one job",
    "message_id": "the message id of this publish (new for each publish)",
    "queue": "the queue's name ([queue] name, {run} filled in); on Kafka, the topic's",
    "run": "a word unique to the run",
    "dead_letter_queue": "the promised dead-letter queue (promises.dead_letter_queue)",
    "topic": "on Kafka, the topic's name ([topic] name, {run} filled in)",
    "dead_letter_topic": "on Kafka, the dead-letter topic",
}
#: AMQP basic properties a ``[message] properties`` table may set (besides content_type and
#: message_id, which have fields of their own).
AMQP_PROPERTIES = ("correlation_id", "reply_to", "type", "app_id", "user_id", "priority",
                   "expiration", "content_encoding")

#: HTTP tables a consumer file may not use, and what to write instead.
_HTTP_ONLY = {
    "url": "a consumer is started by the harness: give a [start] table",
    "endpoint": "describe the message in [message]",
    "operations": "describe the message in [message]",
    "key": "say where the dedup key goes in [message] (dedup = \"header\", \"message-id\" or "
           "\"body\")",
    "tenant": "consumers have no tenants here: leave [tenant] out",
    "store_proxy": "leave [store_proxy] out: the consumer's broker connection is the one the "
                   "harness faults",
    "client": "leave [client] out: the harness publishes with publisher confirms",
}


def is_consumer(data: Mapping[str, Any]) -> bool:
    """Does parsed TOML describe a queue consumer (``kind = "consumer"``, a ``[queue]`` or a
    ``[topic]``)?"""
    return data.get("kind") == "consumer" or "queue" in data or "topic" in data


class ConsumerStart(Start):
    """How the harness starts the consumer.  The command gets the broker's address through a
    proxy the harness may cut (``{amqp_url}``; on Kafka ``{kafka_bootstrap}``), the queue (or
    topic) and, when it serves HTTP (health, effects, hooks), ``{port}``.  ``ready = "queue"``
    waits until the broker reports a consumer on the queue (on Kafka ``"group"``: a member of
    the group with its partitions): for a worker with no port of its own, such as Celery."""

    ready: Literal["http", "tcp", "queue", "group"] = "queue"  # type: ignore[assignment]

    @model_validator(mode="after")
    def _needs_port(self) -> ConsumerStart:
        used = placeholders([*self.command, *self.env.values()])
        if "amqp_url" not in used and "kafka_bootstrap" not in used:
            raise ValueError("the command (or env) must use {amqp_url} (on Kafka "
                             "{kafka_bootstrap}): the consumer has to reach the broker through "
                             "the address the harness gives it")
        if self.ready in ("http", "tcp") and "port" not in used:
            raise ValueError(f"ready = \"{self.ready}\" needs {{port}} in the command (or env), "
                             "so the harness chooses the port it checks; or use ready = \"queue\" "
                             "(on Kafka \"group\")")
        return self


class BrokerSpec(_Section):
    """The broker: RabbitMQ (``kind = "rabbitmq"``, the default: the harness's own, ``url``
    left out, or a given one) or Kafka (``kind = "kafka"``: the harness's own broker, ``bootstrap``
    left out, or a given one)."""

    kind: BrokerKind = "rabbitmq"
    url: str | None = None
    #: Seconds of AMQP heartbeat the consumer is expected to use: how long the broker takes to
    #: notice a stalled consumer.  The harness waits at most about three times this long.  On
    #: Kafka, a third of ``session_timeout`` when left out: three missed heartbeats end a session.
    heartbeat: Duration = 5.0
    #: Kafka: a running broker's bootstrap address (``127.0.0.1:9092``); its proxied links come
    #: from ``IDEM_KAFKA_LINKS`` (docs/consumers.md, "On Kafka").
    bootstrap: str | None = None
    #: Kafka: ``session.timeout.ms`` the harness gives the consumer (``{session_timeout_ms}``)
    #: or the consumer's own: how soon a killed or cut-off member is dropped from the group.
    session_timeout: Duration | None = None
    #: Kafka: ``max.poll.interval.ms`` the harness gives the consumer
    #: (``{max_poll_interval_ms}``) or the consumer's own: what a job that does not poll must
    #: outlive for its member to leave the group (the zombie of a rebalance).
    max_poll_interval: Duration | None = None

    @model_validator(mode="before")
    @classmethod
    def _kafka_heartbeat(cls, data: Any) -> Any:
        """On Kafka the heartbeat the harness waits on is a third of the session timeout."""
        if (isinstance(data, Mapping) and data.get("kind") == "kafka"
                and "heartbeat" not in data and data.get("session_timeout") is not None):
            seconds = data["session_timeout"]
            seconds = parse_duration(seconds) if isinstance(seconds, str) else float(seconds)
            return {**data, "heartbeat": seconds / 3}
        return data

    @model_validator(mode="after")
    def _amqp(self) -> BrokerSpec:
        if self.kind == "rabbitmq":
            if self.url is not None and not self.url.startswith(("amqp://", "amqps://")):
                raise ValueError("url must start with amqp:// (for example "
                                 "amqp://guest:guest@127.0.0.1:5672/)")
            kafka = [n for n in ("bootstrap", "session_timeout", "max_poll_interval")
                     if getattr(self, n) is not None]
            if kafka:
                raise ValueError(f"{', '.join(kafka)} belong to a Kafka broker: add kind = "
                                 "\"kafka\" to [broker], or leave them out for RabbitMQ")
            return self
        if self.url is not None:
            raise ValueError("a Kafka broker has a bootstrap address, not a url: write "
                             "bootstrap = \"127.0.0.1:9092\" (or leave it out: the harness "
                             "starts its own)")
        if self.bootstrap is not None and not all(
                part.strip().rpartition(":")[2].isdigit() and part.strip().rpartition(":")[0]
                for part in self.bootstrap.split(",")):
            raise ValueError(f"bootstrap {self.bootstrap!r} is not HOST:PORT; write e.g. "
                             "\"127.0.0.1:9092\"")
        if (self.session_timeout is not None and self.max_poll_interval is not None
                and self.max_poll_interval < self.session_timeout):
            raise ValueError("max_poll_interval must be at least session_timeout: Kafka's "
                             "clients refuse a poll interval shorter than the session")
        return self

    @property
    def capabilities(self) -> frozenset[str]:
        """What scenarios may rely on from this kind of broker: holding what a RabbitMQ
        consumer sends holds only its acks (``ack-hold``); a Kafka group's offsets can be set
        back (``offsets``), a group hands a dead member's partitions to another
        (``partitions``), and a member that outlives ``max_poll_interval`` loses its
        partitions to another (``poll-interval``)."""
        if self.kind == "rabbitmq":
            return frozenset({"ack-hold"})
        caps = {"offsets", "partitions"}
        if self.max_poll_interval is not None:
            caps.add("poll-interval")
        return frozenset(caps)


class QueueSpec(_Section):
    """Where messages go.  ``{run}`` in ``name`` is a word unique to the run, so runs that
    share a broker do not share a queue; the start command receives the result as ``{queue}``.
    With the default exchange (``""``) the routing key is the queue's name."""

    name: str = "idem-{run}"
    exchange: str = ""
    routing_key: str = "{queue}"


class TopicSpec(_Section):
    """Where records go on Kafka: a topic the harness creates for the run (``{run}`` in its
    name, as for a queue), with ``partitions``, read by consumer group ``group``; the start
    command receives them as ``{topic}`` and ``{group}``.  ``dead_letter_topic`` (may use
    ``{topic}``) is created with it, as ``{dead_letter_topic}``."""

    name: str = "idem-{run}"
    partitions: int = Field(default=2, ge=1, le=64)
    group: str = "{topic}"
    dead_letter_topic: str | None = None


class MessageSpec(_Section):
    """The message the harness publishes, and where its dedup key goes.

    ``body`` is any JSON value (a Celery task message is a list); strings in it, in
    ``headers``, ``properties``, ``message_id`` and ``poison`` may use the placeholders of
    ``MESSAGE_PLACEHOLDERS``; any other is an error, not a literal.  ``dedup = "header"`` puts
    the key in ``dedup_header``; ``"message-id"`` makes the key the message id (so a republish
    keeps it); ``"body"`` means the templates carry ``{key}``.  ``poison`` is a body the
    consumer promises to refuse: without one there is no poison scenario, since what is invalid
    is the consumer's to say.  ``properties`` sets AMQP basic properties (``AMQP_PROPERTIES``).
    On Kafka, ``key`` is the record's key (``dedup = "key"`` deduplicates on it; it also picks
    the partition), and a record has no message id or properties.
    """

    body: Any = Field(default_factory=lambda: {"amount": "{amount}", "currency": "usd"})
    headers: dict[str, Any] = Field(default_factory=dict)
    properties: dict[str, Any] = Field(default_factory=dict)
    content_type: str = "application/json"
    message_id: str = "{message_id}"
    key: str | None = None
    dedup: DedupLocation = "header"
    dedup_header: str = "Idempotency-Key"
    poison: Any = None

    @model_validator(mode="after")
    def _placeholders_are_known(self) -> MessageSpec:
        for name, value in (("body", self.body), ("headers", self.headers),
                            ("properties", self.properties), ("message_id", self.message_id),
                            ("key", self.key), ("poison", self.poison)):
            unknown = sorted(set(placeholders(value)) - MESSAGE_PLACEHOLDERS.keys())
            if unknown:
                known = ", ".join(f"{{{p}}}" for p in MESSAGE_PLACEHOLDERS)
                raise ValueError(f"{name} uses {', '.join(f'{{{u}}}' for u in unknown)}, which "
                                 f"the harness does not fill in; [message] may use {known}")
        wrong = sorted(set(self.properties) - set(AMQP_PROPERTIES))
        if wrong:
            raise ValueError(f"properties {', '.join(wrong)} are not AMQP properties the "
                             f"harness sets; use {', '.join(AMQP_PROPERTIES)} (content_type "
                             "and message_id have fields of their own)")
        return self

    @model_validator(mode="after")
    def _key_has_a_place(self) -> MessageSpec:
        used = placeholders([self.body, self.headers, self.properties, self.message_id])
        if self.dedup == "body" and "key" not in used:
            raise ValueError("dedup = \"body\" needs {key} in the body (or headers) template, "
                             "e.g. body = { key = \"{key}\", amount = \"{amount}\" }")
        if self.dedup == "key" and "key" not in placeholders(self.key):
            raise ValueError("dedup = \"key\" deduplicates on the record key: write "
                             "key = \"{key}\" in [message]")
        if "message_id" not in placeholders(self.message_id) and self.dedup != "message-id":
            raise ValueError("message_id must use {message_id}: each publish needs its own id")
        return self


class ConsumerPromises(Promises):
    """What the consumer says it does.  ``dedup_window``: how long a finished key is
    remembered (a redelivery within it must not run the job again); ``lease``: how long a key
    claimed by a consumer that died may stay claimed; ``ack``: when the consumer acks
    (``after-work`` is at-least-once, ``before-work`` admits that a crash loses the job);
    ``max_attempts``: deliveries of a poison message before it is dead-lettered;
    ``dead_letter_queue``: where it goes (may use ``{queue}``)."""

    dedup_window: Duration | None = None
    ack: Literal["after-work", "before-work"] = "after-work"
    max_attempts: int | None = Field(default=None, ge=1)
    dead_letter_queue: str | None = None
    #: What the consumer does with a job whose work failed: deliver it again (``requeue``: a
    #: nack with requeue; ``republish``: a new message, after ``retry_delay``; on Kafka
    #: ``retry``: the partition sought back to the record) until ``max_attempts``, then
    #: dead-letter it; or dead-letter it at once (``dead-letter``).
    on_failure: Literal["requeue", "republish", "retry", "dead-letter"] | None = None
    retry_delay: Duration | None = None
    #: Kafka: when the consumer commits a record's offset: ``after-work`` (at least once),
    #: ``before-work`` or ``auto`` (the client's timer, whatever the work): at most once, a
    #: kill may lose the job.
    commit: Literal["after-work", "before-work", "auto"] | None = None
    #: Kafka: where records the consumer gives up on go (may use ``{topic}``).
    dead_letter_topic: str | None = None

    @property
    def at_most_once(self) -> bool:
        """Does the consumer admit that a crash may lose a job (it acks, or commits, before
        the work is done)?"""
        return self.ack == "before-work" or self.commit in ("before-work", "auto")

    @property
    def dead_letters(self) -> str | None:
        """Where the consumer promises to put what it gives up on: its dead-letter queue, or
        on Kafka its dead-letter topic (a template)."""
        return self.dead_letter_queue or self.dead_letter_topic

    @model_validator(mode="after")
    def _failure_policy(self) -> ConsumerPromises:
        if self.on_failure == "republish" and self.retry_delay is None:
            raise ValueError("on_failure = \"republish\" needs retry_delay (how long the "
                             "consumer waits before publishing the job again), e.g. \"1s\"")
        return self


class TestHook(_Section):
    """Where a test hook travels: a message header, or a field of the JSON body (dotted, with
    list positions as numbers: ``"1.test_pause"`` is a Celery message's kwargs).  Frameworks
    that hand a job only its body never see a header."""

    header: str | None = None
    field: str | None = None
    #: Does the consumer honour the hook on a message's first delivery only (a redelivered
    #: copy does not carry it out again), or on every delivery?
    deliveries: Deliveries = "first"

    @model_validator(mode="after")
    def _one_place(self) -> TestHook:
        if (self.header is None) == (self.field is None):
            raise ValueError("give header = \"X-Test-...\" (a message header) or field = "
                             "\"test_hook\" (a field of the JSON body), not both or neither")
        if self.field is not None and not all(self.field.split(".")):
            raise ValueError(f"field {self.field!r} must be a dotted path such as "
                             "\"test_pause\" or \"1.test_pause\"")
        return self


class PauseHook(TestHook):
    """A message header (or body field) that makes the consumer wait at a point of its work: how
    the harness meets a job in progress (``before-work``: claimed, nothing committed) or holds
    one that is done (``before-ack``: committed, not acked; on Kafka ``before-commit``: its
    offset not committed).  Values may use ``{ms}``."""

    points: dict[Literal["before-work", "before-ack", "before-commit"], str] = Field(
        min_length=1)

    def point(self, name: str) -> str | None:
        """The value template of point ``name``; ``before-ack`` is the same moment as Kafka's
        ``before-commit`` (the work done, the message not settled with the broker)."""
        points: dict[str, str] = {str(k): v for k, v in self.points.items()}
        if name == "before-ack":
            return points.get("before-ack") or points.get("before-commit")
        return points.get(name)


class WorkFailure(TestHook):
    """A message header (or body field) that makes the job's work fail (``[[hooks.
    work_failures]]``): ``when = "before-work"`` raises before anything is written,
    ``"after-work"`` once the work is committed (the retry must find the key done).
    ``deliveries`` says whether a redelivery fails again."""

    name: str = Field(min_length=1)
    value: str
    when: Literal["before-work", "after-work"] = "before-work"
    deliveries: Literal["first", "every"] = "first"


class EventsHook(_Section):
    """An HTTP feed of what the consumer did (deliveries, commits, acks), on its own port:
    ``GET path?after=N`` answering ``{"events": [...], "next": M}`` (docs/consumers.md)."""

    path: str


class ConsumerHooks(Hooks):
    """The HTTP hooks a consumer may offer on its ``{port}``: clock, store size and cleanup as
    for an HTTP service, plus ``pause`` and ``events``.  The request hooks (slow, crash,
    handler errors) have no meaning for a consumer and are refused."""

    pause: PauseHook | None = None
    events: EventsHook | None = None
    work_failures: list[WorkFailure] = Field(default_factory=list)

    def work_failure(self, when: str, deliveries: str) -> WorkFailure | None:
        """The declared failure at ``when`` on ``deliveries``, if any."""
        return next((f for f in self.work_failures
                     if f.when == when and f.deliveries == deliveries), None)

    @model_validator(mode="after")
    def _no_request_hooks(self) -> ConsumerHooks:
        used = [n for n in ("crash", "slow", "handler_error") if getattr(self, n) is not None]
        if self.handler_errors:
            used.append("handler_errors")
        if used:
            raise ValueError(f"{', '.join(used)} are HTTP request hooks; a consumer target "
                             "offers clock, store_size, cleanup, pause, events and "
                             "work_failures (a failing job: [[hooks.work_failures]])")
        names = [f.name for f in self.work_failures]
        if len(set(names)) != len(names):
            raise ValueError(f"work_failures names must be distinct; got {names}")
        return self


class ConsumerTarget(Target):
    """A validated consumer target file."""

    DOCS: ClassVar[str] = "docs/consumers.md"
    kind: Literal["consumer"] = "consumer"
    start: ConsumerStart
    broker: BrokerSpec = Field(default_factory=BrokerSpec)
    queue: QueueSpec = Field(default_factory=QueueSpec)
    topic: TopicSpec = Field(default_factory=TopicSpec)
    message: MessageSpec = Field(default_factory=MessageSpec)
    promises: ConsumerPromises = Field(default_factory=ConsumerPromises)
    hooks: ConsumerHooks = Field(default_factory=ConsumerHooks)

    @model_validator(mode="before")
    @classmethod
    def _no_http_tables(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        for name, instead in _HTTP_ONLY.items():
            if data.get(name) is not None and not _default_table(name, data[name]):
                raise ValueError(f"[{name}] describes an HTTP service; for a consumer, {instead}")
        if "start" not in data:
            raise ValueError("a consumer target needs a [start] table: the harness starts the "
                             "consumer, to hand it the broker's address through a proxy")
        broker = data.get("broker")
        if "topic" in data and not (isinstance(broker, Mapping) and "kind" in broker):
            # a [topic] table says Kafka, as a [queue] table says RabbitMQ
            broker = {**(broker if isinstance(broker, Mapping) else {}), "kind": "kafka"}
            data = {**data, "broker": broker}
        start = data["start"]
        if (isinstance(broker, Mapping) and broker.get("kind") == "kafka"
                and isinstance(start, Mapping) and "ready" not in start):
            data = {**data, "start": {**start, "ready": "group"}}  # Kafka's "queue"
        return data

    @model_validator(mode="after")
    def _fits_its_broker(self) -> ConsumerTarget:
        from harness.consumer._broker_kinds import check_fits

        check_fits(self)
        return self

    @model_serializer(mode="wrap")
    def _as_its_broker_says_it(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Only the tables and fields of the target's own broker: a saved RabbitMQ target reads
        as it did before Kafka, and a saved Kafka target loads again."""
        from harness.consumer._broker_kinds import without_the_other_broker

        data = handler(self)
        return without_the_other_broker(data, self.broker.kind) if isinstance(data, dict) \
            else data

    @property
    def kafka(self) -> bool:
        """Does the consumer read a Kafka topic (``[broker] kind = "kafka"``)?"""
        return self.broker.kind == "kafka"

    @model_validator(mode="after")
    def _hook_fields_fit_the_body(self) -> ConsumerTarget:
        hooks = [("pause", self.hooks.pause)] + [
            (f"work_failures {f.name}", f) for f in self.hooks.work_failures]
        for name, hook in hooks:
            if hook is not None and hook.field is not None:
                try:
                    place_in_body(self.message.body, hook.field, "")
                except ValueError as exc:
                    raise ValueError(f"hooks {name}: {exc}; the field must name a place in "
                                     "[message] body") from None
        return self

    def capabilities(self) -> frozenset[str]:
        """What consumer scenarios may rely on (``CONSUMER_CAPABILITY_HINTS`` says how to
        provide each)."""
        caps = set()
        hooks, promises = self.hooks, self.promises
        if self.moves_clock:
            caps.add("clock")
        if self.can_restart:
            caps.add("restart")
        if self.shares_state:
            caps.add("instances")
        if hooks.store_size:
            caps.add("store-size")
        if hooks.cleanup:
            caps.add("cleanup")
        if hooks.pause and "before-work" in hooks.pause.points:
            caps.add("pause-before-work")
        if hooks.pause and hooks.pause.point("before-ack") is not None:
            caps.add("pause-before-ack")
        if promises.dedup_window is not None:
            caps.add("dedup-window")
        if promises.lease is not None:
            caps.add("lease")
        if self.message.poison is not None:
            caps.add("poison")
        if self.message.dedup != "message-id":
            caps.add("republish")
        if hooks.work_failures:
            caps.add("work-failure")
        return frozenset(caps | self.broker.capabilities)


def _default_table(name: str, value: Any) -> bool:
    """A table as ``model_dump`` writes it back for a consumer (defaults, not the author's):
    a saved run's definition holds every field, and must load again."""
    defaults = ConsumerTarget.model_fields[name].get_default(call_default_factory=True)
    dumped = defaults.model_dump(mode="json") if hasattr(defaults, "model_dump") else defaults
    return bool(value == dumped)


def place_in_body(body: Any, field: str, value: Any) -> Any:
    """``body`` with ``value`` at the dotted ``field`` (``"1.test_pause"``: item 1, then its
    member ``test_pause``), the containers along the way copied; a path the body does not have
    is a ``ValueError`` naming it."""
    head, _, rest = field.partition(".")
    if isinstance(body, list) and head.isdigit() and int(head) < len(body):
        index = int(head)
        inner = place_in_body(body[index], rest, value) if rest else value
        return [*body[:index], inner, *body[index + 1:]]
    if isinstance(body, dict):
        inner = place_in_body(body.get(head, {}), rest, value) if rest else value
        return {**body, head: inner}
    raise ValueError(f"the body has no place for field {field!r} ({head!r} of "
                     f"{type(body).__name__})")

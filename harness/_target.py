"""The target file's model: the TOML description of the service under test, as typed settings.

An HTTP service's tables are defined here; a queue consumer's file extends them
(``harness/consumer/_target.py``), and reading a file of either kind is
``harness/targets/_loader.py``'s job.  The reference server is described by the same kind of
file (``harness/targets/reference.toml``) and gets no private shortcuts.  The format is
documented in docs/targets.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from harness._durations import format_duration, parse_duration

__all__ = [
    "LEASE_SLACK",
    "REAL_LEASE_LIMIT",
    "ClockHook",
    "ClockSpec",
    "CrashHook",
    "Effects",
    "Endpoint",
    "ErrorPolicy",
    "HandlerFault",
    "HttpEffects",
    "KeySpec",
    "KeylessCounting",
    "Promises",
    "RecorderEffects",
    "ReplayMarker",
    "SqlEffects",
    "StoreProxy",
    "Target",
    "encode_key",
    "keyless_counting",
    "placeholders",
    "render_template",
    "split_route",
]

#: Seconds of slack for a lease: the target's lease clock and ours are not the same clock.
LEASE_SLACK = 2.0
#: The longest promised lease the harness outwaits in real time on a target without a clock
#: hook; a longer one can only run out on a clock the harness moves.
REAL_LEASE_LIMIT = 60.0
Duration = Annotated[float, BeforeValidator(parse_duration)]


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


#: An HTTP method a request or hook may use, in any case, kept upper-case: a misspelling
#: (``PUTT``) is refused in the file instead of sent to the service.
Method = Annotated[Literal["POST", "PUT", "PATCH", "DELETE", "GET", "HEAD", "OPTIONS"],
                   BeforeValidator(_upper)]
ErrorPolicy = Literal["release", "store"]


def _statuses(value: Any) -> Any:
    """``409`` or ``[409, 423]``: a list becomes a tuple of distinct statuses, first kept."""
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("give at least one status, e.g. in_progress_status = [409, 423]")
        return tuple(dict.fromkeys(value))
    return value


InProgressStatus = Annotated[
    Annotated[int, Field(ge=400, le=599)] | tuple[Annotated[int, Field(ge=400, le=599)], ...],
    BeforeValidator(_statuses),
]
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
#: The IETF draft's key characters: visible ASCII and the space.
_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")
#: A key with a character outside ASCII, to ask a declared pattern about.
_NON_ASCII_KEY = "k0000000000-k1\u00e9"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Start(_Section):
    """How the harness starts the target itself.  ``shared_state`` says that several processes
    started with this command share one store, so the harness may run two and send a key's
    retries to either; without it the target is judged as one process."""

    command: list[str] = Field(min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    host: str = "127.0.0.1"
    ready: Literal["http", "tcp"] = "http"
    ready_path: str = "/"
    ready_timeout: Duration = 30.0
    restartable: bool = False
    shared_state: bool = False

    @model_validator(mode="after")
    def _needs_port(self) -> Start:
        if not any("{port}" in part for part in self.command):
            raise ValueError("the command must contain {port} so the harness can choose the port")
        return self


class Endpoint(_Section):
    """One keyed operation: the request that causes a side effect.

    ``[endpoint]`` declares the only one; ``[[operations]]`` declares several.  Operations with
    the same ``key_scope`` share one key space: a key sent to one and then to another is a
    reused key (the draft's "same key, different request").  Reuse is only ever probed on
    declared operations, because a route the service does not have proves nothing.
    """

    name: str = ""
    method: Method = "POST"
    path: str = "/charges"
    body: dict[str, Any] = Field(default_factory=lambda: {"amount": "{amount}", "currency": "usd"})
    headers: dict[str, str] = Field(default_factory=dict)
    resource_field: str | None = "id"
    key_scope: str = "shared"
    #: Values of body fields the service promises to refuse (``{ amount = [0, -1] }``): only
    #: these are sent as hostile bodies, since what is invalid is the service's to say.
    invalid_values: dict[str, list[Any]] = Field(default_factory=dict)
    #: Other values a body field may take (``{ currency = ["usd", "eur"] }``): a reuse probe
    #: changes that one field to each of them, so a fingerprint that leaves it out is seen.
    valid_values: dict[str, list[Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _body_can_vary(self) -> Endpoint:
        names = set(placeholders(self.body))
        if not names & {"amount", "nonce"}:
            raise ValueError(
                "the body template needs an {amount} or {nonce} placeholder, so the harness can "
                "make two different requests (key reuse)"
            )
        if not self.path.startswith("/"):
            raise ValueError(f"path {self.path!r} must start with /, e.g. \"/charges\"")
        fields = set(self.body) if isinstance(self.body, dict) else set()
        unknown = sorted(set(self.valid_values) - fields)
        if unknown:
            raise ValueError(f"valid_values names {', '.join(unknown)}, which the body template "
                             f"does not have (its fields: {', '.join(sorted(fields)) or 'none'})")
        return self

    @property
    def label(self) -> str:
        return self.name or f"{self.method.upper()} {self.path}"


class KeySpec(_Section):
    """The key's syntax and the rules the service promises to enforce (docs/targets.md).

    ``max_length = 0`` means no limit is promised; ``pattern`` is a regular expression a valid
    key matches in full; ``invalid_status`` is the status promised for a key that breaks the
    rules (unset: any 4xx).  ``charset`` is what a key may be made of: the draft's printable
    ASCII, or any value a header can carry (``"any"``: non-ASCII and control characters are
    valid keys, so accepting one is no breach).
    """

    header: str = "Idempotency-Key"
    syntax: Literal["token", "sf-string"] = "token"
    max_length: int = Field(default=255, ge=0)
    pattern: str | None = None
    invalid_status: int | None = Field(default=None, ge=400, le=499)
    charset: Literal["printable-ascii", "any"] = "printable-ascii"

    @model_validator(mode="after")
    def _pattern_compiles(self) -> KeySpec:
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern {self.pattern!r} is not a regular expression: {exc}")\
                    from exc
        return self

    def accepts(self, key: str) -> bool:
        """Does ``key`` follow the declared rules (length, pattern, characters)?"""
        if self.max_length and len(key) > self.max_length:
            return False
        if self.charset == "printable-ascii" and not _PRINTABLE_ASCII.fullmatch(key):
            return False
        return self.pattern is None or re.fullmatch(self.pattern, key) is not None

    @property
    def refuses_non_ascii(self) -> bool:
        """Does a declared pattern refuse a non-ASCII key?  Only a pattern says so: under the
        default character set such a key is outside the draft, but a service that takes it
        breaks no promise, and one that decodes header bytes as latin-1 would store it under
        another spelling than the one the harness asks its oracle about."""
        return self.pattern is not None and re.fullmatch(self.pattern, _NON_ASCII_KEY) is None

    @property
    def allows_non_ascii(self) -> bool:
        """May a key carry characters outside ASCII?  Only where the file says any value is a
        key: a header travels as bytes, and a server decoding them as latin-1 (WSGI, Starlette,
        Node) stores another spelling than the UTF-8 the harness sent."""
        return self.charset == "any" and (
            self.pattern is None or re.fullmatch(self.pattern, _NON_ASCII_KEY) is not None)


class TenantSpec(_Section):
    header: str = "Authorization"
    format: str = "Bearer {tenant}"

    @model_validator(mode="after")
    def _has_placeholder(self) -> TenantSpec:
        if "{tenant}" not in self.format:
            raise ValueError("format must contain {tenant}")
        return self


class HttpKeyless(_Section):
    """How an HTTP effects endpoint counts charges made without a key ([effects.keyless]).

    ``how = "query"``: ``url``/``query`` answer the count of keyless charges alone.
    ``how = "total"``: they answer the count of every charge; the harness then sends keyless
    requests one at a time, with nothing else running, and counts the difference around each.
    """

    how: Literal["query", "total"]
    url: str | None = None
    query: dict[str, str] = Field(default_factory=dict)
    count: str | None = None


class HttpEffects(_Section):
    """Side effects counted by an HTTP query whose JSON gives the count (and maybe the ids)."""

    kind: Literal["http"]
    url: str
    query: dict[str, str] = Field(default_factory=dict)
    count: str = "count"
    ids: str | None = None
    keyless: HttpKeyless | None = None

    @model_validator(mode="after")
    def _counts_per_key(self) -> HttpEffects:
        if not any("key" in placeholders(v) for v in self.query.values()):
            raise ValueError(
                "query must pass the key, e.g. query = { key = \"{key}\" }: without it the "
                "endpoint cannot count one key's charges"
            )
        return self


class SqlKeyless(_Section):
    """How a SQL oracle counts charges made without a key: ``query`` (with ``%(tenant)s``)
    counts keyless charges alone (``how = "query"``) or every charge (``how = "total"``)."""

    how: Literal["query", "total"]
    query: str


class SqlEffects(_Section):
    """Side effects counted by a SQL query with ``%(tenant)s`` and ``%(key)s`` parameters."""

    kind: Literal["sql"]
    dsn: str
    query: str
    ids_query: str | None = None
    keyless: SqlKeyless | None = None

    @model_validator(mode="after")
    def _uses_key(self) -> SqlEffects:
        if "%(key)s" not in self.query:
            raise ValueError("query must use the %(key)s parameter (and %(tenant)s for tenants)")
        if not self.dsn.startswith(("postgresql://", "postgres://", "sqlite:///")):
            raise ValueError("dsn must start with postgresql:// or sqlite:///")
        return self


class RecorderEffects(_Section):
    """Side effects the target reports, one call each, to a recorder the harness runs.  The
    target reports a keyless charge with ``"key": null``, so keyless charges count exactly."""

    kind: Literal["recorder"]
    env: str = "IDEM_RECORDER_URL"
    port: int | None = None


Effects = Annotated[HttpEffects | SqlEffects | RecorderEffects, Field(discriminator="kind")]
#: How charges made without a key can be counted: exactly, as a difference of totals, or not.
KeylessCounting = Literal["exact", "total", "none"]


def keyless_counting(effects: HttpEffects | SqlEffects | RecorderEffects) -> KeylessCounting:
    if isinstance(effects, RecorderEffects):
        return "exact"
    if effects.keyless is None:
        return "none"
    return "exact" if effects.keyless.how == "query" else "total"


@dataclass(frozen=True, slots=True)
class ReplayMarker:
    """The header (and its value) by which a target marks an answer as a replay."""

    header: str
    value: str = "true"

    def marks(self, headers: Mapping[str, str] | None) -> bool:
        if not headers:
            return False
        wanted = self.header.lower()
        seen = next((v for k, v in headers.items() if k.lower() == wanted), None)
        return seen is not None and seen.strip().lower() == self.value.lower()


class Promises(_Section):
    """What the target says it does; conformance is judged against these."""

    mode: Literal["strict", "lax"] = "strict"
    mismatch_status: int = Field(default=422, ge=400, le=599)
    in_progress: Literal["conflict", "wait"] = "conflict"
    #: The status (or statuses: ``[409, 423]``) that say "still in progress": never a final
    #: answer.  The first is the one the draft's 409 is compared with.
    in_progress_status: InProgressStatus = 409
    retry_after: bool = False
    wait_timeout: Duration | None = None
    retention: Duration | None = None
    lease: Duration | None = None
    #: The service renews the lease while the handler runs (a heartbeat on its own timer), so
    #: only a dead request's lease runs out: a clock jump past it is no evidence of a takeover.
    lease_renewed: bool = False
    errors: ErrorPolicy = "release"
    replay_header: str | None = None
    replay_value: str = "true"
    validation_errors: Literal["either", "stored", "not-stored"] = "either"
    #: Does another query string make another request?  The draft's and the seed's
    #: fingerprint is method, path and body; a service that also hashes the query says so.
    query_in_fingerprint: bool = False
    cleanup_interval: Duration | None = None
    #: How coarse the store's expiry is: a record may outlive the retention by this much and
    #: still be no unremoved key (P11).  Redis ``EXPIRE``/``SETEX`` take whole seconds and
    #: remove an expired key lazily or in a sampling cycle: a second by default; a store that
    #: expires by the minute (a cron sweep) says so.
    expiry_granularity: Duration = 1.0

    @property
    def in_progress_statuses(self) -> frozenset[int]:
        """Every status that means "in progress"."""
        status = self.in_progress_status
        return frozenset(status) if isinstance(status, tuple) else frozenset({status})

    @property
    def in_progress_primary(self) -> int:
        """The in-progress status the target names first (the one noted against the draft)."""
        status = self.in_progress_status
        return status[0] if isinstance(status, tuple) else status

    def expiry_allowance(self) -> tuple[float, str]:
        """How long past its retention a record may still be in the store without a flaw
        (the store's expiry granularity and the cleanup interval), and that in words."""
        interval = self.cleanup_interval or 0.0
        words = (f"{format_duration(self.expiry_granularity)} for the store's expiry "
                 "granularity" + (f" and {format_duration(interval)} for the cleanup interval"
                                  if interval else ""))
        return self.expiry_granularity + interval, words

    def says_in_progress(self, status: int | None) -> bool:
        return status is not None and status in self.in_progress_statuses

    @property
    def replay_marker(self) -> ReplayMarker | None:
        if self.replay_header is None:
            return None
        return ReplayMarker(self.replay_header, self.replay_value)

    def marks_replay(self, headers: Mapping[str, str] | None) -> bool:
        """Does an answer with ``headers`` say it is a replay?  Only the promised header with
        the promised value does: some libraries send ``Idempotent-Replayed: false`` on fresh
        answers."""
        marker = self.replay_marker
        return marker is not None and marker.marks(headers)


class ClockHook(_Section):
    """Moves the target's clock: ``path`` (query string allowed) and ``body`` may use
    ``{seconds}``; ``body = {}`` sends no body, for a hook such as
    ``POST /admin/clock?seconds={seconds}``.

    A test clock kept in a process's memory goes back to real time when the process restarts,
    taking with it every jump the harness made; the harness keeps the target's time itself and
    puts it back.  ``read`` is a path answering the target's current time (Unix seconds, ISO
    8601 or an HTTP date, as text or in the JSON field ``read_field``), by which the harness
    sees where a restarted clock stands; without it, ``restart_resets`` says whether a restart
    resets the clock (true) or keeps it (false, a clock kept in the store)."""

    method: Method = "POST"
    path: str
    body: dict[str, Any] = Field(default_factory=lambda: {"seconds": "{seconds}"})
    read: str | None = None
    read_field: str | None = None
    restart_resets: bool | None = None

    @model_validator(mode="after")
    def _read_is_a_path(self) -> ClockHook:
        if self.read is not None and not self.read.startswith("/"):
            raise ValueError(f"read {self.read!r} must be a path starting with /, e.g. "
                             "\"/admin/clock\"")
        if self.read_field is not None and self.read is None:
            raise ValueError("read_field names a field of the answer to `read`: give read too")
        return self


class ClockSpec(_Section):
    """Moves the clock of a target the harness starts from outside ([clock]): ``kind =
    "faketime"`` starts its processes under libfaketime, whose offset the harness rewrites.
    ``check`` is a path answering the target's current time (Unix seconds or ISO 8601) for a
    target whose answers carry no ``Date`` header; without it the ``Date`` header of
    ``start.ready_path`` shows whether the target saw a jump."""

    kind: Literal["faketime"]
    check: str | None = None

    @model_validator(mode="after")
    def _check_is_a_path(self) -> ClockSpec:
        if self.check is not None and not self.check.startswith("/"):
            raise ValueError(f"check {self.check!r} must be a path starting with /, e.g. \"/time\"")
        return self


class CrashHook(_Section):
    """A request header that makes the target die at a named point, or a signal to send it."""

    header: str | None = None
    points: dict[Literal["after-claim", "after-work", "before-response"], str] = Field(
        default_factory=dict
    )
    signal: Literal["SIGKILL", "SIGTERM"] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> CrashHook:
        if self.header is None and self.signal is None:
            raise ValueError("give a header (with points) or a signal")
        if self.header is not None and not self.points:
            raise ValueError("a crash header needs points, e.g. points = { after-claim = \"...\" }")
        return self


class HeaderHook(_Section):
    """A request header that changes how the target handles that one request."""

    header: str
    value: str


HandlerFaultWhen = Literal["before-work", "after-work", "error-answer"]


class HandlerFault(_Section):
    """One way to make the handler fail (``[[hooks.handler_errors]]``): an exception before the
    work, an exception after it (the charge may be made), or a 5xx the handler answers."""

    name: str = Field(min_length=1)
    header: str
    value: str
    when: HandlerFaultWhen = "before-work"
    #: This fault's error policy, where it differs from ``promises.errors`` (a library may
    #: release the key on an exception and store a 5xx the handler returned).
    errors: ErrorPolicy | None = None


class StoreSizeHook(_Section):
    """The key table's size (P11, and "is a key in progress" for the scenarios' timing), read
    one of three ways: an HTTP route answering JSON (``path``, the fields ``rows`` and
    ``in_progress``); a SQL count (``sql``, ``in_progress_sql``) over ``dsn`` or the SQL
    oracle's; or Redis (``redis``, a loopback URL): the keys matching ``pattern`` (every key:
    DBSIZE) and ``in_progress_pattern``.  Services whose store is a database or Redis rarely
    offer a statistics route."""

    method: Method = "GET"
    path: str | None = None
    rows: str = "rows"
    in_progress: str | None = None
    sql: str | None = None
    in_progress_sql: str | None = None
    dsn: str | None = None
    redis: str | None = None
    pattern: str | None = None
    in_progress_pattern: str | None = None

    @model_validator(mode="after")
    def _one_way(self) -> StoreSizeHook:
        ways = [name for name, given in (("path", self.path), ("sql", self.sql),
                                         ("redis", self.redis)) if given is not None]
        if len(ways) != 1:
            raise ValueError("give exactly one of path (an HTTP route), sql (a count over the "
                             f"database) or redis (a Redis URL); got {', '.join(ways) or 'none'}")
        if self.dsn is not None and not self.dsn.startswith(
                ("postgresql://", "postgres://", "sqlite:///")):
            raise ValueError("dsn must start with postgresql:// or sqlite:///")
        if self.redis is not None and not self.redis.startswith(("redis://", "unix://")):
            raise ValueError(f"redis {self.redis!r} must be a URL such as "
                             "\"redis://127.0.0.1:6379/0\"")
        belongs = {"in_progress": ("path", self.in_progress),
                   "in_progress_sql": ("sql", self.in_progress_sql), "dsn": ("sql", self.dsn),
                   "pattern": ("redis", self.pattern),
                   "in_progress_pattern": ("redis", self.in_progress_pattern)}
        misplaced = [f"{name} goes with {way}" for name, (way, given) in belongs.items()
                     if given is not None and way not in ways]
        if misplaced:
            raise ValueError(f"{'; '.join(misplaced)}, and this hook reads the size with "
                             f"{ways[0]}: remove them or read it that way")
        return self

    @property
    def reports_in_progress(self) -> bool:
        """Can it tell how many keys are in progress?"""
        return bool(self.in_progress or self.in_progress_sql or self.in_progress_pattern)


class CallHook(_Section):
    method: Method = "POST"
    path: str


class Hooks(_Section):
    clock: ClockHook | None = None
    crash: CrashHook | None = None
    slow: HeaderHook | None = None
    handler_error: HeaderHook | None = None
    handler_errors: list[HandlerFault] = Field(default_factory=list)
    store_size: StoreSizeHook | None = None
    cleanup: CallHook | None = None

    @model_validator(mode="after")
    def _one_error_form(self) -> Hooks:
        if self.handler_error is not None and self.handler_errors:
            raise ValueError("give either handler_error (one fault) or [[hooks.handler_errors]] "
                             "(several), not both; move handler_error into the list as "
                             "{ name = \"exception\", header = ..., value = ... }")
        names = [f.name for f in self.handler_errors]
        if len(set(names)) != len(names):
            raise ValueError(f"handler_errors names must be distinct; got {names}")
        return self

    @property
    def handler_faults(self) -> tuple[HandlerFault, ...]:
        """Every declared handler fault; the single ``handler_error`` form is an exception
        raised before the work."""
        if self.handler_error is not None:
            return (HandlerFault(name="exception", header=self.handler_error.header,
                                 value=self.handler_error.value),)
        return tuple(self.handler_errors)


class StoreProxy(_Section):
    """The target's own database connection, routed through a proxy the harness may fault.

    ``upstream`` is the database's ``host:port``.  A target that starts its own database writes
    ``127.0.0.1:{store_port}`` instead: the harness picks a free port, and the start command
    gets the same ``{store_port}`` to start the database on it.  ``protocol`` says what the link
    speaks: ``"tcp"`` (the default) is bytes the harness only faults; ``"postgresql"`` and
    ``"redis"`` are read, so the harness can count the target's writes and strike right after one
    (harness/services/_commit_proxy.py).
    """

    upstream: str
    protocol: Literal["tcp", "postgresql", "redis"] = "tcp"

    @model_validator(mode="after")
    def _host_and_port(self) -> StoreProxy:
        if not re.fullmatch(r"[^:\s/]+:(\d+|\{store_port\})", self.upstream):
            raise ValueError(f"upstream {self.upstream!r} must be host:port, e.g. "
                             "\"127.0.0.1:5432\", or \"127.0.0.1:{store_port}\" for a database "
                             "the start command starts on a port the harness picks")
        return self

    @property
    def picks_port(self) -> bool:
        return self.upstream.endswith("{store_port}")

    @property
    def reads_writes(self) -> bool:
        """Can the harness see the target's writes on this link?"""
        return self.protocol != "tcp"


class ClientSpec(_Section):
    timeout: Duration = 10.0
    fault_timeout: Duration = 1.5


class Target(_Section):
    """A validated target file."""

    #: The page that documents this kind of target file, for error messages.
    DOCS: ClassVar[str] = "docs/targets.md"
    name: str = Field(min_length=1)
    description: str = ""
    url: str | None = None
    start: Start | None = None
    endpoint: Endpoint = Field(default_factory=Endpoint)
    operations: list[Endpoint] = Field(default_factory=list)
    key: KeySpec = Field(default_factory=KeySpec)
    tenant: TenantSpec | None = None
    effects: Effects
    promises: Promises = Field(default_factory=Promises)
    hooks: Hooks = Field(default_factory=Hooks)
    clock: ClockSpec | None = None
    store_proxy: StoreProxy | None = None
    client: ClientSpec = Field(default_factory=ClientSpec)
    source: str = ""
    #: How to give this target a missing capability, where the file is not the way (the
    #: reference server's store proxy comes from ``--postgres``, not from its target file).
    _enable_hints: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _first_operation_is_the_endpoint(cls, data: Any) -> Any:
        """``[[operations]]`` replaces ``[endpoint]``; the first operation is the one every
        scenario sends unless it says otherwise."""
        if isinstance(data, Mapping) and data.get("operations"):
            if "endpoint" in data:
                raise ValueError("give [endpoint] (one keyed operation) or [[operations]] "
                                 "(several), not both: move [endpoint] into the list")
            return {**data, "endpoint": data["operations"][0]}
        return data

    @model_serializer(mode="wrap")
    def _as_a_file_says_it(self, handler: SerializerFunctionWrapHandler) -> Any:
        """With ``[[operations]]`` the endpoint is their first, not a table of its own: a
        saved target (results.json, story.json, a load plan) must load again."""
        data = handler(self)
        if self.operations and isinstance(data, dict):
            data.pop("endpoint", None)
        return data

    @model_validator(mode="after")
    def _operations_are_distinct(self) -> Target:
        seen = [(o.method.upper(), o.path) for o in self.keyed_operations]
        if len(set(seen)) != len(seen):
            raise ValueError(f"[[operations]] must differ in method or path; got {seen}")
        return self

    @model_validator(mode="after")
    def _where(self) -> Target:
        if (self.url is None) == (self.start is None):
            raise ValueError("give exactly one of `url` (a running target) or a [start] table")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// (for example http://127.0.0.1:8000)")
        if isinstance(self.effects, RecorderEffects) and self.start is None and not (
            self.effects.port
        ):
            raise ValueError(
                "a recorder needs the harness to start the target ([start]) or a fixed "
                "effects.port the running target already calls"
            )
        if self.store_proxy is not None and self.store_proxy.picks_port and (
            self.start is None or "store_port" not in placeholders(
                [*self.start.command, *self.start.env.values()])
        ):
            raise ValueError(
                "store_proxy.upstream uses {store_port}, so the start command (or start.env) "
                "must pass {store_port} on, for the target to start its database on that port"
            )
        if self.clock is not None and self.start is None:
            raise ValueError("[clock] kind = \"faketime\" moves the clock of processes the "
                             "harness starts: give a [start] table, or use [hooks.clock] for a "
                             "running target")
        if self.clock is not None and self.hooks.clock is not None:
            raise ValueError("give [clock] (the harness moves the clock from outside) or "
                             "[hooks.clock] (the target moves its own), not both")
        size = self.hooks.store_size
        if (size is not None and size.sql is not None and size.dsn is None
                and not isinstance(self.effects, SqlEffects)):
            raise ValueError("[hooks.store_size] sql runs over a database: give its dsn, e.g. "
                             "dsn = \"sqlite:///{workdir}/keys.db\" (the default is the dsn of "
                             "[effects] kind = \"sql\")")
        return self

    def with_enable_hints(self, hints: Mapping[str, str]) -> Target:
        copy = self.model_copy()
        copy._enable_hints = {**self._enable_hints, **hints}
        return copy

    @property
    def enable_hints(self) -> Mapping[str, str]:
        return self._enable_hints

    @property
    def declares_endpoint(self) -> bool:
        """Did the file say which request causes the side effect (``[endpoint]`` or
        ``[[operations]]``)?  Without it the harness sends the default, ``POST /charges``
        with ``{"amount": ..., "currency": "usd"}``, and says so when a run starts."""
        return "endpoint" in self.model_fields_set

    @property
    def keyed_operations(self) -> tuple[Endpoint, ...]:
        """Every operation the target declares as keyed, the primary one first."""
        return tuple(self.operations) or (self.endpoint,)

    def operation_for(self, method: str | None, path: str | None) -> Endpoint | None:
        """The declared operation a request to ``method path`` belongs to, if any."""
        wanted = split_route(method, path)[:2]
        return next((o for o in self.keyed_operations
                     if (o.method.upper(), o.path) == wanted), None)

    def sharing_keys_with(self, operation: Endpoint) -> tuple[Endpoint, ...]:
        """The other declared operations in ``operation``'s key space."""
        mine = (operation.method.upper(), operation.path)
        return tuple(o for o in self.keyed_operations
                     if (o.method.upper(), o.path) != mine and o.key_scope == operation.key_scope)

    @property
    def shares_state(self) -> bool:
        """May the harness start a second process and treat both as one service?"""
        return self.start is not None and self.start.shared_state

    @property
    def moves_clock(self) -> bool:
        """Can the harness move the target's clock: its own hook, or libfaketime from outside?"""
        return self.hooks.clock is not None or self.clock is not None

    @property
    def lease_runs_out_on_the_clock(self) -> bool:
        """Can a jump of the clock pass a lease?  Not where the service renews its leases on a
        timer of its own (``lease_renewed``): the timer sees no jump, so only real time tells
        whether a lease ran out (a living handler's renewed, a dead one's lapsed, or one a
        restarted process wrongly keeps renewing)."""
        return self.moves_clock and not self.promises.lease_renewed

    @property
    def lease_can_run_out(self) -> bool:
        """Can the harness let a promised lease run out: on the target's clock (a clock hook or
        libfaketime), or by waiting, when it is at most ``REAL_LEASE_LIMIT``?  False without a
        lease."""
        lease = self.promises.lease
        return lease is not None and (self.lease_runs_out_on_the_clock
                                      or lease <= REAL_LEASE_LIMIT)

    @property
    def can_restart(self) -> bool:
        return self.start is not None and self.start.restartable

    def capabilities(self) -> frozenset[str]:
        """What scenarios may rely on: each maps to a hook, a promise or a start mode."""
        caps = set()
        hooks = self.hooks
        if self.moves_clock:
            caps.add("clock")
        if hooks.crash and self.can_restart:
            caps.add("crash")
        if self.can_restart:
            caps.add("restart")
        if hooks.slow:
            caps.add("slow")
        if hooks.handler_faults:
            caps.add("handler-error")
        if hooks.store_size:
            caps.add("store-size")
        if hooks.cleanup:
            caps.add("cleanup")
        if self.tenant:
            caps.add("tenants")
        if self.promises.retention is not None:
            caps.add("retention")
        if self.promises.lease is not None:
            caps.add("lease")
        if self.store_proxy is not None:
            caps.add("store-proxy")
        if self.shares_state:
            caps.add("instances")
        if keyless_counting(self.effects) == "total":
            caps.add("keyless-total")  # keyless charges counted from every charge's total
        return frozenset(caps)

    def with_start_args(self, args: list[str]) -> Target:
        """The same target started with extra command-line arguments (later ones win)."""
        if self.start is None:
            raise ValueError(f"target {self.name} is not started by the harness")
        start = self.start.model_copy(update={"command": [*self.start.command, *args]})
        return self.model_copy(update={"start": start})

    def without_clock_from_outside(self) -> Target:
        """The same target with no [clock]: libfaketime did not move its clock."""
        return self.model_copy(update={"clock": None})

    def with_promises(self, **changes: Any) -> Target:
        return self.model_copy(update={"promises": self.promises.model_copy(update=changes)})


def split_route(method: str | None, path: str | None) -> tuple[str, str, str]:
    """``(METHOD, path, query)`` of a request as sent: what names its operation is the method
    and the path without the query string."""
    bare, _, query = (path or "").partition("?")
    return (method or "").upper(), bare, query


def placeholders(value: Any) -> list[str]:
    """The placeholder names used anywhere in a template value."""
    if isinstance(value, str):
        return _PLACEHOLDER.findall(value)
    if isinstance(value, Mapping):
        return [n for v in value.values() for n in placeholders(v)]
    if isinstance(value, list):
        return [n for v in value for n in placeholders(v)]
    return []


def render_template(value: Any, values: Mapping[str, Any]) -> Any:
    """Fill ``{name}`` placeholders; a string that is exactly one placeholder takes the value's
    own type, so ``amount = "{amount}"`` becomes a JSON number."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), value)
    if isinstance(value, Mapping):
        return {k: render_template(v, values) for k, v in value.items()}
    if isinstance(value, list):
        return [render_template(v, values) for v in value]
    return value


def encode_key(key: str, syntax: str) -> str:
    """The key as it goes on the wire: a bare token, or an RFC 8941 sf-string."""
    if syntax == "sf-string":
        return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return key

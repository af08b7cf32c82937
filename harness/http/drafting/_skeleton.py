"""A commented target file drafted for a new user, from an OpenAPI document or a URL and a path.

Every promise the draft cannot know is written as the IETF draft's value (or left out)
with a ``FILL IN`` comment, so the user sees what to check, and ``idem-harness probe`` can ask
the service.  The text always loads: ``render_draft`` validates what it wrote.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import tomlkit
from tomlkit.items import InlineTable, Table

from harness._errors import TargetFileError
from harness.http.drafting._openapi import ApiDocument, ApiOperation, EffectsEndpoint
from harness.http.drafting._openapi_bodies import body_template
from harness.targets._loader import parse_target

__all__ = [
    "Draft",
    "KeyDraft",
    "OperationDraft",
    "TenantDraft",
    "draft_for_path",
    "draft_from_openapi",
    "render_draft",
]

_DEFAULT_URL = "http://127.0.0.1:8000"
_PROBE = "idem-harness probe --target THIS_FILE --write"


@dataclass
class OperationDraft:
    name: str
    method: str
    path: str
    body: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    resource_field: str | None = None
    invalid_values: dict[str, list[Any]] = field(default_factory=dict)
    #: Some value of the body could not be chosen from the schema (its notes say which).
    body_unsure: bool = False
    valid_values: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class KeyDraft:
    header: str = "Idempotency-Key"
    #: None: nobody said whether the key is required.
    required: bool | None = None
    max_length: int | None = None
    pattern: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class TenantDraft:
    header: str
    format: str
    note: str


@dataclass
class Draft:
    name: str
    origin: str
    description: str = ""
    url: str | None = None
    start: list[str] | None = None
    ready_path: str | None = None
    operations: list[OperationDraft] = field(default_factory=list)
    key: KeyDraft = field(default_factory=KeyDraft)
    tenant: TenantDraft | None = None
    tenant_note: str | None = None
    effects: EffectsEndpoint | None = None
    effects_prefix: str = ""
    fill_in: list[str] = field(default_factory=list)
    #: The replay header a keyed operation's 2xx answer declares, and where it was seen.
    replay_header: tuple[str, str] | None = None


def _slug(text: str, fallback: str = "my-service") -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or fallback


def _split_base(base_url: str | None) -> tuple[str | None, str]:
    """``http://h:p/api/v1`` as ``(http://h:p, /api/v1)``: the harness's proxy forwards to
    host and port only, so a base path belongs in front of every operation's path."""
    if not base_url:
        return None, ""
    parts = urlsplit(base_url)
    if not parts.scheme:  # a relative server URL: only its path is known
        return None, "/" + base_url.strip("/") if base_url.strip("/") else ""
    return f"{parts.scheme}://{parts.netloc}", parts.path.rstrip("/")


def _path_value(name: str, parameter: Mapping[str, Any]) -> tuple[str, bool]:
    """A value for a path parameter: the document's example when it has one."""
    schema = parameter.get("schema") or {}
    for source in (parameter, schema):
        for field_name in ("example", "default"):
            if field_name in source:
                return str(source[field_name]), True
        if isinstance(source.get("enum"), list) and source["enum"]:
            return str(source["enum"][0]), True
    return ("1" if schema.get("type") == "integer" else "test"), False


def _operation_draft(operation: ApiOperation, prefix: str) -> OperationDraft:
    body = body_template(operation.request_schema, operation.request_example)
    path = operation.path
    notes = ([operation.summary] if operation.summary else []) + body.notes
    for name, parameter in operation.path_parameters.items():
        value, known = _path_value(name, parameter)
        path = path.replace("{" + name + "}", value)
        if not known:
            notes.append(f"FILL IN the path: {{{name}}} became {value!r}, the document gives "
                         "no example; use a value the service accepts")
    resource = None
    answer = operation.success
    if answer is not None and answer[1]:
        properties = answer[1].get("properties") or {}
        resource = "id" if "id" in properties else next(
            (n for n in properties if n.lower().endswith("id")), None)
    name = operation.operation_id or _slug(f"{operation.method} {operation.path}")
    return OperationDraft(name, operation.method, prefix + path, body.template, notes,
                          resource, body.invalid_values, body.needs_attention,
                          {k: v for k, v in body.valid_values.items() if k in body.template})


def _key_draft(operations: Sequence[ApiOperation]) -> KeyDraft:
    keys = [o.key for o in operations if o.key is not None]
    if not keys:
        return KeyDraft(notes=["FILL IN: no operation declares the key header; "
                               "Idempotency-Key is the IETF draft's name"])
    first = keys[0]
    notes = [f"declared by {', '.join(o.label for o in operations if o.key)}"]
    if len({k.name.lower() for k in keys}) > 1:
        notes.append("the operations name the header differently ("
                     + ", ".join(sorted({k.name for k in keys})) + "): one is used here")
    limits = {(k.max_length, k.pattern) for k in keys}
    if len(limits) > 1:
        notes.append("the operations declare different limits: the first one's are used")
    if first.min_length and first.min_length > 1:
        notes.append(f"the document asks for at least {first.min_length} characters: the "
                     "harness's own keys are longer")
    return KeyDraft(first.name, first.required, first.max_length or 0, first.pattern, notes)


def draft_from_openapi(api: ApiDocument, operations: Sequence[ApiOperation], *,
                       name: str | None = None, base_url: str | None = None,
                       start: list[str] | None = None, ready_path: str | None = None,
                       source: str) -> Draft:
    """A draft for ``operations`` of ``api`` (its keyed operations, or those the user chose)."""
    base = base_url or next(iter(api.servers), None)
    url, prefix = _split_base(base)
    tenant = next((o.tenant for o in operations if o.tenant is not None), None)
    notes = [o.tenant_note for o in operations if o.tenant_note]
    draft = Draft(
        name=name or _slug(api.title),
        origin=f"{source} (OpenAPI {api.openapi}"
               + (f", {api.title!r} {api.version}" if api.title else "") + ")",
        description=api.title,
        url=None if start else (url or _DEFAULT_URL),
        start=start, ready_path=ready_path,
        operations=[_operation_draft(o, prefix) for o in operations],
        key=_key_draft(operations),
        tenant=TenantDraft(tenant.header, tenant.format,
                           f"from the security scheme {tenant.scheme!r}") if tenant else None,
        tenant_note=notes[0] if notes and tenant is None else None,
        effects=api.effects, effects_prefix=prefix,
        replay_header=_replay_header(operations),
    )
    if url is None and not start:
        draft.fill_in.append("url: the document names no absolute server URL")
    return draft


def _replay_header(operations: Sequence[ApiOperation]) -> tuple[str, str] | None:
    """The replay header the first keyed operation that declares one declares, and where."""
    for operation in operations:
        found = operation.replay_header
        if found is not None:
            header, status = found
            return header, f"the document's {status} answer of {operation.label}"
    return None


def draft_for_path(url: str | None, method: str, path: str, *, name: str | None = None,
                   start: list[str] | None = None, ready_path: str | None = None) -> Draft:
    """The same skeleton without a document: one operation, every promise to fill in."""
    base, prefix = _split_base(url)
    operation = OperationDraft(
        _slug(f"{method} {path}"), method.upper(), prefix + path,
        {"amount": "{amount}", "currency": "usd"},
        ["FILL IN the body: the service's request, with {amount} or {nonce} where a field "
         "can vary"], body_unsure=True)
    return Draft(name=name or _slug(path, "my-service"),
                 origin=f"{method.upper()} {path}, without an OpenAPI document",
                 url=None if start else (base or _DEFAULT_URL),
                 start=start, ready_path=ready_path, operations=[operation],
                 key=KeyDraft(notes=["FILL IN: the header the service reads the key from"]),
                 tenant_note="FILL IN: add [tenant] (header = \"Authorization\", format = "
                             "\"Bearer {tenant}\") if the service keeps keys per tenant")


# ---- rendering -------------------------------------------------------------------------------

def _inline(value: Mapping[str, Any]) -> InlineTable:
    table = tomlkit.inline_table()
    for key, item in value.items():
        table[key] = _inline(item) if isinstance(item, Mapping) else item
    return table


def _put(table: Any, key: str, value: Any, comment: str | None = None) -> None:
    item = tomlkit.item(_inline(value) if isinstance(value, Mapping) else value)
    if comment:
        item.comment(comment)
        item.trivia.comment_ws = "  "
    table.add(key, item)


def _pattern(value: str) -> Any:
    """A regular expression as a TOML literal string, so its backslashes stay as written."""
    return tomlkit.string(value, literal="'" not in value and "\n" not in value)


def _header(doc: Any, draft: Draft) -> None:
    lines = [
        f"Drafted by `idem-harness init` from {draft.origin}.",
        "Lines marked FILL IN are what the document cannot tell: check each, or let the",
        f"service answer:  {_PROBE}",
        "then:  idem-harness run --target THIS_FILE      (docs/targets.md explains each field)",
    ]
    for line in lines:
        doc.add(tomlkit.comment(line))
    doc.add(tomlkit.nl())
    doc.add("name", draft.name)
    if draft.description:
        doc.add("description", draft.description)


def _where(doc: Any, draft: Draft) -> None:
    if draft.start is None:
        doc.add(tomlkit.nl())
        doc.add(tomlkit.comment("Where the service runs.  FILL IN if this is not it; or replace "
                                "`url` with a [start] table"))
        doc.add(tomlkit.comment("(the harness then starts it, can restart it and move its "
                                "clock).  Loopback only."))
        _put(doc, "url", draft.url or _DEFAULT_URL,
             "FILL IN" if any(f.startswith("url") for f in draft.fill_in) else None)
        return
    start = tomlkit.table()
    start.add(tomlkit.comment("The harness starts the service with this command; {port} is a "
                              "free port it picks."))
    _put(start, "command", draft.start)
    if draft.ready_path:
        _put(start, "ready", "http")
        _put(start, "ready_path", draft.ready_path, "GET it answers 2xx once the service is up")
    else:
        _put(start, "ready", "tcp", "ready once the port accepts; \"http\" with ready_path "
                                    "waits for a 2xx")
    _put(start, "restartable", False, "FILL IN: true lets the harness kill and restart it "
                                      "(crash scenarios): only if its keys survive a restart")
    _put(start, "shared_state", False, "FILL IN: true when several processes share one store")
    doc.add("start", start)
    doc.add(tomlkit.nl())
    clock = tomlkit.table()
    for line in ("The harness moves the service's clock from outside (libfaketime), so retention,",
                 "expiry and lease scenarios apply.  A statically linked binary (Go) ignores it:",
                 "the harness sees that and calls those scenarios n/a; or remove [clock]."):
        clock.add(tomlkit.comment(line))
    _put(clock, "kind", "faketime")
    doc.add("clock", clock)


def _operation_table(operation: OperationDraft, *, several: bool) -> Table:
    table = tomlkit.table()
    for note in operation.notes:
        table.add(tomlkit.comment(note))
    if several:
        _put(table, "name", operation.name)
    _put(table, "method", operation.method)
    _put(table, "path", operation.path)
    _put(table, "body", operation.body,
         "FILL IN the values marked above" if operation.body_unsure else None)
    if operation.resource_field:
        _put(table, "resource_field", operation.resource_field,
             "the answer's field naming what was created")
    else:
        table.add(tomlkit.comment("resource_field = \"id\"   FILL IN: the answer's field naming "
                                  "what was created"))
    if operation.invalid_values:
        _put(table, "invalid_values", operation.invalid_values,
             "the schema's bounds: values the service must refuse")
    if operation.valid_values:
        _put(table, "valid_values", operation.valid_values,
             "the schema's enums: each is tried alone under a reused key")
    if several:
        _put(table, "key_scope", "shared", "operations of one scope share keys (the draft's "
                                           "fingerprint includes the path); FILL IN if not")
    return table


def _operations(doc: Any, draft: Draft) -> None:
    doc.add(tomlkit.nl())
    if len(draft.operations) == 1:
        doc.add("endpoint", _operation_table(draft.operations[0], several=False))
        return
    operations = tomlkit.aot()
    for operation in draft.operations:
        operations.append(_operation_table(operation, several=True))
    doc.add("operations", operations)


def _key(doc: Any, draft: Draft) -> None:
    key = draft.key
    table = tomlkit.table()
    for note in key.notes:
        table.add(tomlkit.comment(note))
    _put(table, "header", key.header)
    _put(table, "syntax", "token", "FILL IN: \"sf-string\" if the service wants the key "
                                   "quoted (\"...\"), as the IETF draft writes it")
    if key.max_length:
        _put(table, "max_length", key.max_length, "the document's maxLength")
    else:
        _put(table, "max_length", 0, "no limit is declared (0); probe measures what it accepts")
    if key.pattern:
        _put(table, "pattern", _pattern(key.pattern), "the document's pattern")
    table.add(tomlkit.comment("invalid_status = 400   FILL IN: the status for a key that breaks "
                              "these rules (unset: any 4xx)"))
    doc.add("key", table)


def _tenant(doc: Any, draft: Draft) -> None:
    if draft.tenant is None:
        doc.add(tomlkit.comment("No [tenant]: " + (draft.tenant_note or "the operations name no "
                                "security scheme a tenant's credential goes in")))
        return
    table = tomlkit.table()
    table.add(tomlkit.comment(f"{draft.tenant.note}.  The harness sends one made-up "
                              "credential per tenant:"))
    table.add(tomlkit.comment("FILL IN: make the service accept them as distinct tenants (a "
                              "test token scheme), or remove [tenant]"))
    _put(table, "header", draft.tenant.header)
    _put(table, "format", draft.tenant.format)
    doc.add("tenant", table)


def _effects(doc: Any, draft: Draft) -> None:
    table = tomlkit.table()
    found = draft.effects
    if found is not None:
        query = {found.key_parameter: "{key}"}
        if found.tenant_parameter and draft.tenant is not None:
            query = {found.tenant_parameter: "{tenant}", **query}
        table.add(tomlkit.comment(f"Found in the document: GET {found.path} counts per key.  "
                                  "It must count what was really done"))
        table.add(tomlkit.comment("(a ledger), from outside the idempotency layer: "
                                  "docs/targets.md, \"Counting side effects\"."))
        _put(table, "kind", "http")
        _put(table, "url", draft.effects_prefix + found.path)
        _put(table, "query", query)
        _put(table, "count", found.count)
        if found.ids:
            _put(table, "ids", found.ids)
    else:
        for line in ("FILL IN: how the harness counts side effects per key, from outside the "
                     "idempotency layer:",
                     "an HTTP query (kind = \"http\", below), a SQL query (kind = \"sql\", dsn, "
                     "query) or a recorder",
                     "the service calls (kind = \"recorder\"); docs/targets.md, \"Counting side "
                     "effects\".  Until then",
                     "every verdict that needs a count is unknown."):
            table.add(tomlkit.comment(line))
        _put(table, "kind", "http")
        _put(table, "url", "/FILL-IN/effects", "FILL IN")
        _put(table, "query", {"tenant": "{tenant}", "key": "{key}"} if draft.tenant else
             {"key": "{key}"})
        _put(table, "count", "count")
    table.add(tomlkit.comment("keyless = { how = \"query\", query = { tenant = \"{tenant}\" } }  "
                              "FILL IN: how charges made"))
    table.add(tomlkit.comment("without a key are counted (\"query\": alone; \"total\": every "
                              "charge), else P7 cannot count them"))
    doc.add("effects", table)


def _promises(doc: Any, draft: Draft) -> None:
    table = tomlkit.table()
    table.add(tomlkit.comment(f"What the service promises.  FILL IN each, or: {_PROBE}"))
    required = draft.key.required
    if required is None:
        _put(table, "mode", "strict", "FILL IN: \"strict\" answers 400 without a key, "
                                      "\"lax\" processes the request")
    else:
        _put(table, "mode", "strict" if required else "lax",
             "the document says the header is " + ("required" if required else "optional"))
    _put(table, "mismatch_status", 422, "the IETF draft's status for a reused key; FILL IN")
    _put(table, "in_progress", "conflict", "FILL IN: \"conflict\" answers in_progress_status "
                                           "at once, \"wait\" holds the retry")
    _put(table, "in_progress_status", 409, "the IETF draft's; FILL IN")
    _put(table, "retry_after", False, "FILL IN: the in-progress answer carries Retry-After")
    _put(table, "retention", "24h", "FILL IN: how long a key is remembered")
    table.add(tomlkit.comment("lease = \"30s\"   FILL IN: after a crash, when a key in progress "
                              "may be claimed again"))
    _put(table, "errors", "release", "FILL IN: a failing handler \"release\"s the key or "
                                     "\"store\"s its 5xx")
    if draft.replay_header is not None:
        header, where = draft.replay_header
        _put(table, "replay_header", header, f"declared by {where}")
        _put(table, "replay_value", "true", "FILL IN: its value on a replay (probe sees it)")
    else:
        table.add(tomlkit.comment("replay_header = \"Idempotent-Replayed\"   FILL IN: the "
                                  "header that marks a replay, if any"))
    _put(table, "validation_errors", "either", "a 4xx for a bad body: \"stored\", "
                                               "\"not-stored\" or \"either\"")
    doc.add("promises", table)


def render_draft(draft: Draft) -> str:
    """The draft as a commented target file; raises ``TargetFileError`` if it would not load,
    which is a bug in the draft, never the user's."""
    doc = tomlkit.document()
    _header(doc, draft)
    _where(doc, draft)
    _operations(doc, draft)
    doc.add(tomlkit.nl())
    _key(doc, draft)
    doc.add(tomlkit.nl())
    _tenant(doc, draft)
    if draft.tenant is not None:
        doc.add(tomlkit.nl())
    _effects(doc, draft)
    doc.add(tomlkit.nl())
    _promises(doc, draft)
    text = tomlkit.dumps(doc).rstrip("\n") + "\n"
    try:
        parse_target(tomlkit.parse(text).unwrap(), source="(drafted target)")
    except TargetFileError as exc:
        raise TargetFileError("(drafted target)", [
            *exc.problems,
            ("", "idem-harness init drafted a file it cannot load", "report this as a bug"),
        ]) from exc
    return text

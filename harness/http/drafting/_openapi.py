"""OpenAPI 3.0/3.1 documents read for ``init``: which operations take an idempotency key.

With what limits, what body and what credentials.

The document is validated by ``openapi-spec-validator`` and its ``$ref``s (internal, other
files, loopback URLs) are followed by ``jsonschema-path``, never by hand.  What comes out is
plain data: every schema dereferenced (a recursive one cut at ``MAX_DEPTH``), so the drafting
code never meets a ``$ref``.  Only loopback URLs are fetched, for the document and for the files
it refers to, unless the caller allows remote ones.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import httpx
import referencing.exceptions
import yaml
from jsonschema_path import SchemaPath
from openapi_spec_validator.shortcuts import get_validator_cls
from openapi_spec_validator.validation.exceptions import ValidatorDetectError

from harness._errors import HarnessError, UsageError
from harness.services._network import require_loopback

if TYPE_CHECKING:
    from referencing._core import Resolver  # not re-exported by the package; a type only

__all__ = [
    "MAX_DEPTH",
    "ApiDocument",
    "ApiOperation",
    "EffectsEndpoint",
    "KeyHeader",
    "TenantHeader",
    "read_openapi",
]

#: How deep a request schema is followed; a recursive one (a tree, a linked list) is cut there.
MAX_DEPTH = 12
#: How deep an answer's schema is read: its fields and their types are all the draft uses.
_ANSWER_DEPTH = 4
_METHODS = ("post", "put", "patch", "delete", "get")
_KEY_PARAMETERS = {"key", "idempotency_key", "idempotency-key", "idempotencykey"}
_TENANT_PARAMETERS = {"tenant", "tenant_id", "tenantid"}
_FETCH_TIMEOUT = 10.0


@dataclass(frozen=True, slots=True)
class KeyHeader:
    """The idempotency-key header an operation declares, with its schema's limits."""

    name: str
    required: bool
    max_length: int | None = None
    min_length: int | None = None
    pattern: str | None = None


@dataclass(frozen=True, slots=True)
class TenantHeader:
    """How a security scheme carries a credential: the harness sends one per tenant."""

    scheme: str
    header: str
    format: str


@dataclass(frozen=True, slots=True)
class ApiOperation:
    """One operation of the document, dereferenced."""

    method: str
    path: str
    operation_id: str | None = None
    summary: str = ""
    key: KeyHeader | None = None
    path_parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    query_parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    request_schema: Mapping[str, Any] | None = None
    request_example: Any = None
    #: Status (as written in the document) to the JSON schema of that answer, or None.
    responses: Mapping[str, Mapping[str, Any] | None] = field(default_factory=dict)
    #: Status (as written in the document) to the names of the headers that answer declares.
    response_headers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tenant: TenantHeader | None = None
    #: Why the operation's credentials cannot be sent per tenant, when they cannot.
    tenant_note: str | None = None

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def replay_header(self) -> tuple[str, str] | None:
        """A header a 2xx answer declares whose name says it marks a replay
        (``Idempotent-Replayed``, ``X-Idempotency-Replayed``...), and that answer's status."""
        for status in sorted(self.response_headers, key=lambda s: (s != "201", s)):
            if status.startswith("2"):
                for name in self.response_headers[status]:
                    if "replay" in name.lower():
                        return name, status
        return None

    @property
    def success(self) -> tuple[str, Mapping[str, Any] | None] | None:
        """The first 2xx answer (201 before 200) and its schema."""
        for status in sorted(self.responses, key=lambda s: (s != "201", s)):
            if status.startswith("2"):
                return status, self.responses[status]
        return None


@dataclass(frozen=True, slots=True)
class EffectsEndpoint:
    """A GET the document offers that counts what was done per key: the oracle's candidate."""

    path: str
    key_parameter: str
    count: str
    tenant_parameter: str | None = None
    ids: str | None = None


@dataclass(frozen=True, slots=True)
class ApiDocument:
    source: str
    openapi: str
    title: str
    version: str
    servers: tuple[str, ...]
    operations: tuple[ApiOperation, ...]
    effects: EffectsEndpoint | None = None

    @property
    def keyed(self) -> tuple[ApiOperation, ...]:
        return tuple(o for o in self.operations if o.key is not None)

    @property
    def unkeyed_writes(self) -> tuple[ApiOperation, ...]:
        """POST and PATCH operations without a key header: what might have needed one."""
        return tuple(o for o in self.operations
                     if o.key is None and o.method in ("POST", "PATCH"))

    def operation(self, method: str, path: str) -> ApiOperation | None:
        return next((o for o in self.operations
                     if o.method == method.upper() and o.path == path), None)


def _problem(source: str, problem: str, fix: str) -> UsageError:
    return UsageError(f"{source}: {problem}\n  fix: {fix}")


def _parse(text: str, source: str) -> Any:
    """JSON or YAML text as data (JSON first: PyYAML reads YAML 1.1, which some JSON trips)."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            pass  # perhaps YAML flow style: let YAML say what is wrong
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _problem(source, f"neither JSON nor YAML: {exc}",
                       "give an OpenAPI document in JSON or YAML") from exc


def _fetch(url: str, *, allow_remote: bool) -> str:
    """Fetch a URL's text; loopback only unless allowed; redirects are not followed, since one
    could lead off the machine."""
    require_loopback(url, allow_remote=allow_remote)
    try:
        response = httpx.get(url, timeout=_FETCH_TIMEOUT, follow_redirects=False)
    except httpx.HTTPError as exc:
        raise _problem(url, f"cannot be fetched: {exc}",
                       "check that the service serves its OpenAPI document there") from exc
    if response.status_code != 200:
        raise _problem(url, f"answered {response.status_code}, not the document",
                       "give the URL that answers 200 with the OpenAPI document")
    return response.text


def _read_source(source: str, *, allow_remote: bool) -> tuple[Any, str]:
    """The document's data and its base URI (for relative references)."""
    if urlsplit(source).scheme in ("http", "https"):
        return _parse(_fetch(source, allow_remote=allow_remote), source), source
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _problem(source, "the file does not exist",
                       "give the path of an OpenAPI document, or a loopback URL that serves "
                       "it") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _problem(source, f"cannot be read: {exc}",
                       "check its permissions and that it is UTF-8 text") from exc
    return _parse(text, source), path.absolute().as_uri()


class _References(Mapping[str, Any]):
    """What ``jsonschema-path`` may follow a ``$ref`` to: files, and loopback URLs unless
    remote ones are allowed.  Every scheme is "present", so no reference falls through to the
    library's own unguarded fetching."""

    def __init__(self, *, allow_remote: bool) -> None:
        self._allow_remote = allow_remote

    def __getitem__(self, scheme: str) -> Any:
        return self._load

    def __contains__(self, scheme: object) -> bool:
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(("file", "http", "https"))

    def __len__(self) -> int:
        return 3

    def _load(self, uri: str) -> Any:
        parts = urlsplit(uri)
        if parts.scheme == "file":
            source = str(Path(parts.path))
            try:
                text = Path(parts.path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise _problem(source, f"a $ref points to it, but it cannot be read: {exc}",
                               "correct the $ref or add the file") from exc
            return _parse(text, source)
        if parts.scheme in ("http", "https"):
            return _parse(_fetch(uri, allow_remote=self._allow_remote), uri)
        raise _problem(uri, "a $ref uses a scheme the harness does not follow",
                       "refer to a file or a loopback http URL")


def _unfollowed(exc: BaseException) -> str:
    """Which reference could not be followed, in a line: the library's own message quotes the
    whole document it looked in."""
    reference = getattr(exc, "ref", None)
    if isinstance(reference, str):
        shown = f"#{reference}" if reference.startswith("/") else reference
        return f"{shown} does not exist" if isinstance(
            exc, referencing.exceptions.PointerToNowhere) else f"{shown} cannot be resolved"
    text = str(exc)
    return text if len(text) <= 200 else text[:199] + "…"


def _harness_error(exc: BaseException) -> HarnessError | None:
    """A harness error raised while the library followed a reference, however it was wrapped."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, HarnessError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _plain(node: SchemaPath, limit: int = MAX_DEPTH) -> Any:
    """The value at ``node`` with every ``$ref`` followed by the ``referencing`` resolver
    (relative to the file each one is written in), ``limit`` levels deep: a recursive schema,
    or a part nobody reads, is cut there, so a large document stays quick to read."""
    with node.resolve() as resolved:
        return _dereferenced(resolved.contents, resolved.resolver, limit)


def _dereferenced(value: Any, resolver: Resolver[Any], limit: int) -> Any:
    if isinstance(value, Mapping):
        if limit <= 0:
            return {}
        reference = value.get("$ref")
        if isinstance(reference, str):
            found = resolver.lookup(reference)
            target = _dereferenced(found.contents, found.resolver, limit - 1)
            siblings = {k: v for k, v in value.items() if k != "$ref"}  # 3.1 allows them
            if not siblings or not isinstance(target, Mapping):
                return target
            return {**target, **_dereferenced(siblings, resolver, limit)}
        return {str(k): _dereferenced(v, resolver, limit - 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_dereferenced(v, resolver, limit - 1) for v in value]
    return value


def _json_media(content: Mapping[str, Any]) -> str | None:
    """The JSON media type among ``content``'s (``application/json`` first)."""
    types = list(content)
    for media in types:
        if media.split(";")[0].strip().lower() == "application/json":
            return media
    return next((m for m in types if "json" in m.lower()), None)


def _parameters(path_item: SchemaPath, operation: SchemaPath) -> list[Mapping[str, Any]]:
    """The operation's parameters: the path item's, overridden by the operation's own."""
    merged: dict[tuple[str, str], Mapping[str, Any]] = {}
    for owner in (path_item, operation):
        if "parameters" not in owner:
            continue
        for parameter in _plain(owner / "parameters"):
            if isinstance(parameter, Mapping) and "name" in parameter:
                merged[(str(parameter["name"]).lower(), str(parameter.get("in")))] = parameter
    return list(merged.values())


def _key_header(parameters: list[Mapping[str, Any]]) -> KeyHeader | None:
    """The operation's key header: ``Idempotency-Key``, or any header whose name says
    idempotency (``X-Idempotency-Key``)."""
    for parameter in parameters:
        name = str(parameter["name"])
        if parameter.get("in") == "header" and "idempotency" in name.lower():
            schema = parameter.get("schema") or {}
            return KeyHeader(
                name=name, required=bool(parameter.get("required", False)),
                max_length=_int_or_none(schema.get("maxLength")),
                min_length=_int_or_none(schema.get("minLength")),
                pattern=schema.get("pattern") if isinstance(schema.get("pattern"), str) else None,
            )
    return None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tenant(requirements: Any, schemes: Mapping[str, Any]) -> tuple[TenantHeader | None,
                                                                     str | None]:
    """The first security scheme of the operation that a per-tenant header can carry."""
    notes = []
    for requirement in requirements or []:
        for name in requirement or {}:
            scheme = schemes.get(name) or {}
            kind = scheme.get("type")
            if kind == "apiKey" and scheme.get("in") == "header":
                return TenantHeader(name, str(scheme["name"]), "{tenant}"), None
            if kind == "http" and str(scheme.get("scheme", "")).lower() == "bearer":
                return TenantHeader(name, "Authorization", "Bearer {tenant}"), None
            if kind in ("oauth2", "openIdConnect"):
                return TenantHeader(name, "Authorization", "Bearer {tenant}"), None
            notes.append(f"security scheme {name!r} ({kind} "
                         f"{scheme.get('scheme') or scheme.get('in') or ''}".rstrip() +
                         ") cannot carry a tenant name")
    return None, "; ".join(notes) or None


def _responses(operation: SchemaPath) -> dict[str, Mapping[str, Any] | None]:
    answers: dict[str, Mapping[str, Any] | None] = {}
    if "responses" not in operation:
        return answers
    for status in operation / "responses":
        code = str(status.name)
        with status.open() as response:
            content = response.get("content") if isinstance(response, Mapping) else None
        media = _json_media(content) if isinstance(content, Mapping) else None
        schema = None
        if media is not None and "schema" in (status / "content" / media):
            schema = _plain(status / "content" / media / "schema", _ANSWER_DEPTH)
        answers[code] = schema if isinstance(schema, Mapping) else None
    return answers


def _response_headers(operation: SchemaPath) -> dict[str, tuple[str, ...]]:
    """The headers each answer declares, by status."""
    declared: dict[str, tuple[str, ...]] = {}
    if "responses" not in operation:
        return declared
    for status in operation / "responses":
        with status.open() as response:
            headers = response.get("headers") if isinstance(response, Mapping) else None
        if isinstance(headers, Mapping):
            declared[str(status.name)] = tuple(str(name) for name in headers)
    return declared


def _request(operation: SchemaPath) -> tuple[Mapping[str, Any] | None, Any]:
    """The JSON request body's schema and its example, if the operation has one."""
    if "requestBody" not in operation:
        return None, None
    body = operation / "requestBody"
    with body.open() as contents:
        content = contents.get("content") if isinstance(contents, Mapping) else None
    media = _json_media(content) if isinstance(content, Mapping) else None
    if media is None:
        return None, None
    entry = _plain(body / "content" / media)
    example = entry.get("example")
    if example is None and isinstance(entry.get("examples"), Mapping):
        first = next(iter(entry["examples"].values()), None)
        example = first.get("value") if isinstance(first, Mapping) else None
    schema = entry.get("schema")
    return (schema if isinstance(schema, Mapping) else None), example


def _operations(spec: SchemaPath, raw: Mapping[str, Any]) -> Iterator[ApiOperation]:
    schemes = _plain(spec / "components" / "securitySchemes") if (
        "components" in spec and "securitySchemes" in spec / "components") else {}
    default_security = raw.get("security")
    if "paths" not in spec:
        return
    for path_item in spec / "paths":
        path = str(path_item.name)
        for method in _METHODS:
            if method not in path_item:
                continue
            operation = path_item / method
            with operation.open() as contents:
                details = dict(contents)
            parameters = _parameters(path_item, operation)
            schema, example = _request(operation) if method != "get" else (None, None)
            tenant, note = _tenant(_plain(operation / "security") if "security" in details
                                   else default_security, schemes)
            yield ApiOperation(
                method=method.upper(), path=path,
                operation_id=details.get("operationId"),
                summary=str(details.get("summary") or ""),
                key=_key_header(parameters),
                path_parameters={str(p["name"]): p for p in parameters if p.get("in") == "path"},
                query_parameters={str(p["name"]): p for p in parameters
                                  if p.get("in") == "query"},
                request_schema=schema, request_example=example,
                responses=_responses(operation),
                response_headers=_response_headers(operation), tenant=tenant, tenant_note=note,
            )


def _effects(operations: tuple[ApiOperation, ...]) -> EffectsEndpoint | None:
    """A GET taking a key as a query parameter and answering an object with an integer: the
    document's own way to count what was done for a key, if it has one."""
    for operation in operations:
        if operation.method != "GET" or operation.path_parameters:
            continue
        key = next((n for n in operation.query_parameters if n.lower() in _KEY_PARAMETERS),
                   None)
        answer = operation.success
        if key is None or answer is None or not answer[1]:
            continue
        properties = answer[1].get("properties") or {}
        integers = [n for n, s in properties.items()
                    if isinstance(s, Mapping) and s.get("type") == "integer"]
        if not integers:
            continue
        count = "count" if "count" in integers else integers[0]
        ids = next((n for n, s in properties.items()
                    if isinstance(s, Mapping) and s.get("type") == "array"
                    and n.lower().endswith("ids")), None)
        tenant = next((n for n in operation.query_parameters
                       if n.lower() in _TENANT_PARAMETERS), None)
        return EffectsEndpoint(operation.path, key, count, tenant, ids)
    return None


def _servers(raw: Mapping[str, Any], base_uri: str) -> tuple[str, ...]:
    """Server URLs with their variables at their defaults; relative ones against the
    document's own URL when it was fetched."""
    urls = []
    for server in raw.get("servers") or []:
        if not isinstance(server, Mapping) or not isinstance(server.get("url"), str):
            continue
        url = server["url"]
        for name, variable in (server.get("variables") or {}).items():
            if isinstance(variable, Mapping) and "default" in variable:
                url = url.replace("{" + str(name) + "}", str(variable["default"]))
        if base_uri.startswith("http") and not urlsplit(url).scheme:
            url = urljoin(base_uri, url)
        urls.append(url)
    return tuple(urls)


def read_openapi(source: str, *, allow_remote: bool = False) -> ApiDocument:
    """Read, validate and walk the OpenAPI document at ``source`` (a path or a URL)."""
    raw, base_uri = _read_source(source, allow_remote=allow_remote)
    if not isinstance(raw, Mapping):
        raise _problem(source, "is not an OpenAPI document (its top level is not a mapping)",
                       "give an OpenAPI 3.0 or 3.1 document")
    version = str(raw.get("openapi") or "")
    if not version.startswith(("3.0", "3.1")):
        found = f"swagger {raw['swagger']}" if "swagger" in raw else (
            f"openapi {version}" if version else "no `openapi` field")
        raise _problem(source, f"is not OpenAPI 3.0 or 3.1 ({found})",
                       "convert it to OpenAPI 3 (for Swagger 2.0, e.g. with swagger2openapi) "
                       "and give that")
    spec = SchemaPath.from_dict(raw, base_uri=base_uri,
                                handlers=_References(allow_remote=allow_remote))
    try:
        validator = get_validator_cls(raw)(spec)
        errors = list(validator.iter_errors())
        if errors:
            shown = "\n".join(f"  {getattr(e, 'json_path', '$')}: {e.message[:200]}"
                              for e in errors[:5])
            more = f"\n  ... and {len(errors) - 5} more" if len(errors) > 5 else ""
            raise _problem(source, f"is not a valid OpenAPI {version} document:\n{shown}{more}",
                           "correct the document at those places (openapi-spec-validator "
                           "FILE lists every error)")
        operations = tuple(_operations(spec, raw))
    except HarnessError:
        raise
    except ValidatorDetectError as exc:
        raise _problem(source, f"its version cannot be told: {exc}",
                       "set `openapi: 3.0.3` or `openapi: 3.1.0`") from exc
    except (referencing.exceptions.Unresolvable, referencing.exceptions.Unretrievable,
            LookupError, OSError) as exc:
        cause = _harness_error(exc)
        if cause is not None:
            raise cause from exc
        raise _problem(source, f"a $ref cannot be followed: {_unfollowed(exc)}",
                       "correct the reference (a file beside the document, or #/components/...)"
                       ) from exc
    about = raw.get("info")
    info: Mapping[str, Any] = about if isinstance(about, Mapping) else {}
    return ApiDocument(source=source, openapi=version, title=str(info.get("title") or ""),
                       version=str(info.get("version") or ""),
                       servers=_servers(raw, base_uri), operations=operations,
                       effects=_effects(operations))

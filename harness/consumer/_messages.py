"""The messages the harness publishes, made from the target's ``[message]`` templates.

Every message of one job carries the same values (amount, nonce), so copies and republishes are
the same job.  A copy may be *re-serialised*: the same JSON written with other whitespace and
member order, as another producer or a relay would write it, so a consumer that deduplicates on
the body's bytes shows itself.  Test hooks (a pause, a failing job) go where the target says:
a header, or a field of the JSON body for frameworks that hand the job only its body.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from harness._target import render_template
from harness.consumer._target import ConsumerTarget, TestHook, place_in_body

__all__ = ["ENCODINGS", "Hook", "MessageParts", "compose", "header_text"]

#: How a JSON body may be written, by number: the copies of a burst take them in turn.
ENCODINGS = ("plain", "compact-sorted", "indented-reversed", "tabbed-sorted")


@dataclass(frozen=True, slots=True)
class Hook:
    """A test hook to set on one message: which one, and its rendered value."""

    spec: TestHook
    value: str


@dataclass(frozen=True, slots=True)
class MessageParts:
    """One message as any broker sends it: its bytes, headers, id and properties (RabbitMQ's),
    its record key (Kafka's) and its content type."""

    body: bytes
    headers: dict[str, Any]
    message_id: str | None
    properties: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    content_type: str = "application/json"


def _reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed(v) for v in value]
    return value


def _serialise(body: Any, encoding: int) -> bytes:
    if isinstance(body, str):
        return body.encode()
    name = ENCODINGS[encoding % len(ENCODINGS)]
    if name == "compact-sorted":
        return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()
    if name == "indented-reversed":
        return json.dumps(_reversed(body), indent=1).encode()
    if name == "tabbed-sorted":
        return json.dumps(body, indent="\t", sort_keys=True, ensure_ascii=False).encode()
    return json.dumps(body).encode()


def compose(target: ConsumerTarget, values: dict[str, Any], *, poison: bool,
            hooks: tuple[Hook, ...] = (), encoding: int = 0) -> MessageParts:
    """One message for ``values`` (``key``, ``message_id``, ``amount``... filled in)."""
    spec = target.message
    body = render_template(spec.poison if poison else spec.body, values)
    headers = {k: render_template(v, values) for k, v in spec.headers.items()}
    properties = {k: render_template(v, values) for k, v in spec.properties.items()}
    if spec.dedup == "header":
        headers[spec.dedup_header] = values["key"]
    for hook in hooks:
        if hook.spec.header is not None:
            headers[hook.spec.header] = hook.value
        else:
            assert hook.spec.field is not None
            body = place_in_body(body, hook.spec.field, hook.value)
    message_id = (values["key"] if spec.dedup == "message-id"
                  else str(render_template(spec.message_id, values)))
    key = str(render_template(spec.key, values)) if spec.key is not None else None
    return MessageParts(_serialise(body, encoding), headers, message_id, properties, key,
                        spec.content_type)


def header_text(headers: Mapping[str, Any], name: str) -> str | None:
    """A header's value as text, whatever its case or AMQP type (bytes, str, number)."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            if isinstance(value, bytes):
                return value.decode("utf-8", "replace")
            return value if isinstance(value, str) else json.dumps(value)
    return None

"""A body template from a request's JSON schema: valid values, and placeholders where it varies.

Valid values where the schema says what is valid, and a placeholder (``{amount}``, ``{nonce}``,
``{customer}``) where a field can vary, so two requests under one key can differ (the target
format needs ``{amount}`` or ``{nonce}``).

What the schema cannot tell (a string with a pattern and no example) is filled with a visible
``FILL-IN`` value and a note, never a silent guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BodyDraft", "body_template"]

_AMOUNT_LOW, _AMOUNT_HIGH = 100, 99_999  # the range the harness draws {amount} from
_NONCE_LENGTH = 32  # uuid4().hex
_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "uri": "https://example.com/",
    "ipv4": "127.0.0.1",
}
_DEFAULT_BODY = {"amount": "{amount}", "currency": "usd"}


@dataclass
class BodyDraft:
    """The template, a note per field that matters, values the schema says are invalid, and
    the other values a top-level field may take (its ``enum``)."""

    template: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    invalid_values: dict[str, list[Any]] = field(default_factory=dict)
    valid_values: dict[str, list[Any]] = field(default_factory=dict)
    #: True when a value could not be chosen from the schema: the user must look.
    needs_attention: bool = False


@dataclass
class _State:
    draft: BodyDraft
    amount: bool = False
    nonce: bool = False


def _merged(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``allOf`` folded into one schema; ``oneOf``/``anyOf``: the first choice."""
    if "allOf" in schema:
        properties: dict[str, Any] = dict(schema.get("properties") or {})
        required = list(schema.get("required") or [])
        kind = schema.get("type")
        for part in schema["allOf"]:
            part = _merged(part) if isinstance(part, Mapping) else {}
            properties.update(part.get("properties") or {})
            required += list(part.get("required") or [])
            kind = kind or part.get("type")
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return {**rest, "type": kind or "object", "properties": properties, "required": required}
    for choice in ("oneOf", "anyOf"):
        options = schema.get(choice)
        if isinstance(options, list) and options and isinstance(options[0], Mapping):
            rest = {k: v for k, v in schema.items() if k != choice}
            return _merged({**rest, **options[0]})
    return schema


def _kind(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):  # 3.1: ["integer", "null"]
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and "properties" in schema:
        return "object"
    return kind if isinstance(kind, str) else None


def _example(schema: Mapping[str, Any]) -> tuple[bool, Any]:
    for name in ("const", "example", "default"):
        if name in schema:
            return True, schema[name]
    examples = schema.get("examples")
    if isinstance(examples, list) and examples:
        return True, examples[0]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return True, next((e for e in enum if e is not None), enum[0])
    return False, None


def _number(name: str, schema: Mapping[str, Any], state: _State) -> Any:
    low = schema.get("minimum")
    high = schema.get("maximum")
    exclusive_low = schema.get("exclusiveMinimum")
    if isinstance(exclusive_low, int | float) and not isinstance(exclusive_low, bool):
        low = exclusive_low + (1 if _kind(schema) == "integer" else 1e-9)
    elif exclusive_low is True and isinstance(low, int | float):
        low = low + (1 if _kind(schema) == "integer" else 1e-9)
    step = schema.get("multipleOf")
    fits = ((low is None or low <= _AMOUNT_LOW) and (high is None or high >= _AMOUNT_HIGH)
            and step in (None, 1) and "enum" not in schema and "const" not in schema)
    if fits and not state.amount:
        state.amount = True
        bounds = f"{low if low is not None else '-inf'}..{high if high is not None else 'inf'}"
        state.draft.notes.append(f"{name} = {{amount}}: {_kind(schema)} in {bounds}, a fresh "
                                 "value per request")
        invalid = []
        if low is not None:
            invalid.append(int(low) - 1 if _kind(schema) == "integer" else low - 1)
        if _kind(schema) == "integer":
            invalid.append(0.5 if low is None or low <= 0.5 else int(low) + 0.5)
        if invalid:
            state.draft.invalid_values[name] = invalid
        return "{amount}"
    known, value = _example(schema)
    if known:
        return value
    return low if isinstance(low, int | float) else 1


def _string(name: str, schema: Mapping[str, Any], state: _State) -> Any:
    known, value = _example(schema)
    if known:
        return value
    fmt = schema.get("format")
    if isinstance(fmt, str) and fmt in _FORMATS:
        return _FORMATS[fmt]
    if fmt == "email":
        if not state.nonce:
            state.nonce = True
            return "probe-{nonce}@example.com"
        return "probe@example.com"
    max_length = schema.get("maxLength")
    free = "pattern" not in schema and not isinstance(fmt, str)
    if free and "customer" in name.lower():
        return "{customer}"
    if free and not state.nonce and (max_length is None or max_length >= _NONCE_LENGTH):
        state.nonce = True
        state.draft.notes.append(f"{name} = {{nonce}}: a free string, fresh per request")
        return "{nonce}"
    if free:
        return "x" * max(1, int(schema.get("minLength") or 1))
    state.draft.needs_attention = True
    rule = f"pattern {schema['pattern']!r}" if "pattern" in schema else f"format {fmt!r}"
    state.draft.notes.append(f"FILL IN {name}: a string with {rule} and no example in the "
                             "document")
    return "FILL-IN"


def _value(name: str, schema: Any, state: _State, depth: int) -> Any:
    if not isinstance(schema, Mapping):
        return "FILL-IN"
    schema = _merged(schema)
    kind = _kind(schema)
    enum = schema.get("enum")
    if isinstance(enum, list) and "." not in name and "[" not in name:
        values = [e for e in enum if e is not None]
        if len(values) > 1:  # each is changed to alone, one factor at a time (key-reuse)
            state.draft.valid_values[name] = values
    if kind == "object":
        known, example = _example(schema)
        if known and isinstance(example, Mapping) and not schema.get("properties"):
            return dict(example)
        return _object(schema, state, depth + 1, prefix=f"{name}.")
    if kind in ("integer", "number"):
        return _number(name, schema, state)
    if kind == "string":
        return _string(name, schema, state)
    known, example = _example(schema)
    if known:
        return example
    if kind == "boolean":
        return False
    if kind == "array":
        minimum = int(schema.get("minItems") or 0)
        return [_value(f"{name}[]", schema.get("items"), state, depth + 1)
                for _ in range(minimum)]
    state.draft.needs_attention = True
    state.draft.notes.append(f"FILL IN {name}: its schema gives no type")
    return "FILL-IN"


def _object(schema: Mapping[str, Any], state: _State, depth: int, *,
            prefix: str = "", example: Any = None) -> dict[str, Any]:
    properties = schema.get("properties") or {}
    required = [n for n in schema.get("required") or [] if n in properties]
    chosen = required or list(properties)
    given = example if isinstance(example, Mapping) else {}
    body: dict[str, Any] = {}
    if depth > 8:
        return body
    # The fields that can vary first, so {amount} lands on the amount rather than a quantity.
    ordered = sorted(chosen, key=lambda n: (0 if "amount" in n.lower() else 1))
    for name in ordered:
        field_schema = properties[name]
        if isinstance(field_schema, Mapping) and field_schema.get("readOnly"):
            continue
        before = (len(state.draft.notes), state.draft.needs_attention)
        generated = _value(prefix + name, field_schema, state, depth)
        if name in given and not _varies(generated):
            # The document's example is valid by its author's word: it wins, and what the
            # generator had to say about this field no longer applies.
            del state.draft.notes[before[0]:]
            state.draft.needs_attention = before[1]
            body[name] = given[name]
        else:
            body[name] = generated
    return {name: body[name] for name in chosen if name in body}


def body_template(schema: Mapping[str, Any] | None, example: Any = None) -> BodyDraft:
    """A template for a request with ``schema`` (and the document's ``example``, whose values
    win over generated ones except where a field varies)."""
    if schema is None:
        if isinstance(example, Mapping):
            draft = BodyDraft(dict(example), ["the body is the document's example"])
        else:
            draft = BodyDraft(dict(_DEFAULT_BODY),
                              ["FILL IN: the document gives no JSON request body schema; this "
                               "body is a guess"], needs_attention=True)
            return draft
    else:
        draft = BodyDraft({})
        merged = _merged(schema)
        if _kind(merged) != "object":
            draft.notes.append("FILL IN: the request body is not a JSON object; the harness "
                               "sends objects, so this body is a guess")
            draft.needs_attention = True
            draft.template = dict(_DEFAULT_BODY)
            return draft
        draft.template = _object(merged, _State(draft), 0, example=example)
    if not any(_varies(v) for v in draft.template.values()):
        draft.template["idem_nonce"] = "{nonce}"
        draft.needs_attention = True
        draft.notes.append("FILL IN: no field of the schema can vary, so `idem_nonce` was "
                           "added: make a real field vary ({amount} or {nonce}) if the service "
                           "refuses unknown fields")
    return draft


def _varies(value: Any) -> bool:
    if isinstance(value, str):
        return "{amount}" in value or "{nonce}" in value
    if isinstance(value, Mapping):
        return any(_varies(v) for v in value.values())
    if isinstance(value, list):
        return any(_varies(v) for v in value)
    return False

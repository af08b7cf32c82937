"""One factor at a time: a request's variations under its key, each changed in one respect.

For the catalog's reuse scenario and the explorer alike.

A reuse probe that changes two things (the amount and the path, say) cannot tell which one the
service ignored: a fingerprint that leaves out the path is seen only when the same body goes to
another operation, one that leaves out a field only when that field alone changes.  So each
variation changes one thing: one body field (to a fresh value where the template fills it from
a placeholder, or to each other value the target declares valid), the operation (another
declared one in the same key space, with the same body where its template has the same
fields), or the query string.  A field the template holds constant and the file declares no
other value for is never changed: its other values may be invalid, and a refusal of an invalid
body says nothing about the fingerprint.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from harness._target import Endpoint, Target, placeholders

__all__ = [
    "QUERY_PROBE",
    "REUSE_LABEL",
    "FieldPath",
    "Variation",
    "field_changes",
    "fields_to_vary",
    "operation_change",
    "query_change",
    "same_fields",
    "with_field",
]

#: The query string a query variation adds (a parameter no service reads).
QUERY_PROBE = "idem_probe=1"
#: How the history's label of a request reusing a key with one change begins (then the change).
REUSE_LABEL = "reuse:"

FieldPath = tuple[str, ...]


@dataclass(frozen=True)
class Variation:
    """A request changed in one respect: ``change`` names it for the history's label
    (``reuse:<change>``); ``method``, ``path`` and ``body`` are what is sent."""

    change: str
    method: str
    path: str
    body: Any

    @property
    def label(self) -> str:
        return f"{REUSE_LABEL}{self.change}"


def _leaves(template: Any, path: FieldPath = ()) -> Iterator[tuple[FieldPath, Any]]:
    """Every (field path, template value) of a JSON object template, depth first."""
    if isinstance(template, dict):
        for name, value in template.items():
            if isinstance(value, dict) and value:
                yield from _leaves(value, (*path, name))
            else:
                yield (*path, name), value


def _at(value: Any, path: FieldPath) -> Any:
    for name in path:
        value = value[name]
    return value


def with_field(body: Any, path: FieldPath, value: Any) -> Any:
    """A copy of ``body`` with the field at ``path`` set to ``value``."""
    changed = copy.deepcopy(body)
    holder = _at(changed, path[:-1])
    holder[path[-1]] = value
    return changed


def fields_to_vary(operation: Endpoint) -> list[FieldPath]:
    """The fields whose value may change while the request stays valid: those the template
    fills from a placeholder and those with declared other values; nested fields first (a
    fingerprint over the top level only misses them)."""
    declared = set(operation.valid_values)
    found = [path for path, value in _leaves(operation.body)
             if placeholders(value) or (len(path) == 1 and path[0] in declared)]
    return sorted(found, key=lambda path: -len(path))


def field_changes(operation: Endpoint, body: Any, fresh: Any,
                  fields: Sequence[FieldPath] | None = None) -> list[Variation]:
    """``body`` with one field changed at a time: a placeholder field to its value in
    ``fresh`` (another rendering of the template), a field with declared other values to each
    of them.  A field whose fresh value is the same is left out."""
    variations = []
    for path in fields if fields is not None else fields_to_vary(operation):
        current = _at(body, path)
        alternatives = [v for v in operation.valid_values.get(path[0], []) if len(path) == 1]
        if placeholders(_at(operation.body, path)):
            alternatives.insert(0, _at(fresh, path))
        name = ".".join(path)
        seen: list[Any] = []
        for value in alternatives:
            if value == current or value in seen:
                continue
            seen.append(value)
            declared = value in operation.valid_values.get(path[0], [])
            change = f"field:{name}={value}" if declared else f"field:{name}"
            variations.append(Variation(change, operation.method.upper(), operation.path,
                                        with_field(body, path, value)))
    return variations


def same_fields(one: Endpoint, other: Endpoint) -> bool:
    """Do two operations' body templates have the same fields (so one body suits both)?"""
    return [p for p, _ in _leaves(one.body)] == [p for p, _ in _leaves(other.body)]


def operation_change(target: Target, operation: Endpoint, body: Any, other_body: Any,
                     *, pick: int = 0) -> Variation | None:
    """The same key on another declared operation in ``operation``'s key space: with the same
    body where the other operation's template has the same fields (only the operation
    changes), else with ``other_body``, a body of its own (a body it would refuse proves
    nothing); None when no other operation shares the keys."""
    sharing = target.sharing_keys_with(operation)
    if not sharing:
        return None
    other = sharing[pick % len(sharing)]
    label = other.name or other.path
    return Variation(f"operation:{label}", other.method.upper(), other.path,
                     body if same_fields(operation, other) else other_body)


def query_change(operation: Endpoint, body: Any) -> Variation:
    """The same body on the same path with another query string."""
    separator = "&" if "?" in operation.path else "?"
    return Variation("query", operation.method.upper(),
                     f"{operation.path}{separator}{QUERY_PROBE}", body)

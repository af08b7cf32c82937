"""A probe's observations written into the target file, keeping everything the user wrote.

``tomlkit`` edits the parsed file in place, so comments, order and spacing stay.  Each probed
promise gets a trailing ``# probe: ...`` comment (after the user's own comment on that line, if
any, which is kept); a note about a section as a whole goes on its header line.  A second probe
replaces the first one's comments instead of piling them up.  The result is validated before
it is returned: a probe never writes a file that does not load.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import tomlkit
from tomlkit.items import InlineTable, Item, Table

from harness._errors import TargetFileError
from harness.http.drafting._probe_types import Observation
from harness.targets._loader import parse_target

__all__ = ["apply_observations", "declared_promises", "diff"]

_MARK = "probe:"
_LITERAL = ("pattern",)


def _kept_comment(existing: str | None) -> str:
    """The user's part of a trailing comment: everything before an earlier probe's note."""
    text = (existing or "").lstrip("#").strip()
    return text.split(_MARK, 1)[0].rstrip(" ;")


def _annotate(item: Item, notes: list[str]) -> None:
    if not notes:
        return
    mine = _kept_comment(item.trivia.comment)
    text = f"{_MARK} " + "; ".join(notes)
    item.comment(f"{mine}; {text}" if mine else text)
    item.trivia.comment_ws = "  "


def _without_old_notes(text: str) -> str:
    """The file without the comment lines an earlier probe wrote on their own."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if not line.lstrip().startswith(f"# {_MARK}"))


def _value(field: str, value: Any) -> Item:
    if field in _LITERAL and isinstance(value, str) and "'" not in value:
        return tomlkit.string(value, literal=True)
    item: Item = tomlkit.item(value)
    return item


def _section(doc: Any, name: str, *, inline: bool = False) -> Table | InlineTable:
    """The table ``name`` (dotted when nested: ``hooks.clock``), made when missing.  An inline
    table (``clock = { ... }``) is returned only when ``inline`` allows it: it can take a value
    but not the probe's comments."""
    table: Any = doc
    parts = name.split(".")
    for depth, part in enumerate(parts):
        if part not in table:
            if table is doc:
                doc.add(tomlkit.nl())
            table.add(part, tomlkit.table())
        table = table[part]
        if isinstance(table, InlineTable) and inline and depth == len(parts) - 1:
            return table
        if not isinstance(table, Table):
            shown = ".".join(parts[:depth + 1])
            raise TargetFileError("(probed target)", [(
                shown, "is written as an inline table, which cannot carry the probe's comments",
                f"write it as a [{shown}] table and probe again")])
    assert isinstance(table, Table)
    return table


def _grouped(observations: Iterable[Observation]) -> dict[tuple[str, str | None],
                                                         list[Observation]]:
    groups: dict[tuple[str, str | None], list[Observation]] = {}
    for observation in observations:
        groups.setdefault((observation.section, observation.field), []).append(observation)
    return groups


def apply_observations(text: str, observations: Iterable[Observation], *, source: str) -> str:
    """``text`` (a target file) with the observations written in, as described above."""
    doc = tomlkit.parse(_without_old_notes(text))
    loose: dict[str, list[str]] = {}
    for (section, field), group in _grouped(observations).items():
        notes = [_note(o) for o in group]
        if field is None:
            loose.setdefault(section, []).extend(notes)
            continue
        table = _section(doc, section, inline="." in section)
        if isinstance(table, InlineTable):  # the value goes in it, the notes beside it
            written = next((o.value for o in group if o.writes), None)
            if written is not None:
                table[field] = _value(field, written)
            loose.setdefault(section.rsplit(".", 1)[0], []).extend(
                f"{section.rsplit('.', 1)[1]}.{field}: {n}" for n in notes)
            continue
        written = next((o.value for o in group if o.writes), None)
        if written is None and field not in table:
            # Confirmed (the default holds): say so explicitly, so the promise is visible.
            written = next((o.value for o in group if o.kind == "confirmed"), None)
        if written is not None:
            if field in table:
                table[field] = _value(field, written)
            else:
                table.add(field, _value(field, written))
        if field in table:
            item = table.item(field)
            assert isinstance(item, Item)  # a key of a [table], not a table split in parts
            _annotate(item, notes)
        else:  # nothing to write and nothing there: a note of its own in the section
            loose.setdefault(section, []).extend(f"{field}: {n}" for n in notes)
    for section, notes in loose.items():
        table = _section(doc, section)
        for note in notes:
            table.add(tomlkit.comment(f"{_MARK} {note}"))
    result = tomlkit.dumps(doc).rstrip("\n") + "\n"
    parse_target(tomlkit.parse(result).unwrap(), source=source)  # it must still load
    return result


def _note(observation: Observation) -> str:
    prefix = {"bug": "BUG: ", "deviation": "deviation: ", "unknown": "unknown: "}
    return prefix.get(observation.kind, "") + observation.note


def declared_promises(text: str) -> frozenset[tuple[str, str]]:
    """The promises and key rules a target file makes: the fields of its [promises] and [key]
    tables, except a value not checked yet (``FILL IN`` in its comment, as ``init`` drafts it)
    and one only an earlier probe wrote (its comment is the probe's note alone)."""
    doc = tomlkit.parse(text)
    declared = set()
    for section in ("promises", "key"):
        table = doc.get(section)
        if not isinstance(table, Table):
            continue
        for field in table:
            item = table.item(field)
            comment = item.trivia.comment if isinstance(item, Item) else ""
            if "FILL IN" in comment or (_MARK in comment and not _kept_comment(comment)):
                continue
            declared.add((section, str(field)))
    return frozenset(declared)


def diff(before: str, after: str, name: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile=name, tofile=f"{name} (probed)"))

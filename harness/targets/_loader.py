"""Loading a target file of any kind: read the TOML, pick the kind, validate, say every problem.

Every kind of target shares one format (an HTTP service's tables are ``harness/_target.py``'s,
which other kinds extend); which kind a file describes, and the model it is validated with, its
front end says (``harness._front.front_of_file``), so choosing here names no front end.
Errors name the file, the field and the fix, because the person reading them is writing their
first target file.  A bare name such as ``reference`` means a built-in file of this directory.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from harness._errors import TargetFileError
from harness._front import DEFAULT_KIND, front_named, front_of_file, fronts
from harness._target import Target, _Section

__all__ = ["BUILTIN_TARGETS", "load_target", "parse_target", "saved_target", "target_model"]

#: The built-in target files (``reference.toml``): the directory of this package.
BUILTIN_TARGETS = Path(__file__).parent


def _known_field_names() -> list[str]:
    """Every field name a target file may use, at any depth: what a misspelling is close to."""
    sections: list[type[BaseModel]] = [_Section]
    for section in sections:  # every subclass at any depth: consumer tables extend these
        sections += [s for s in section.__subclasses__() if s not in sections]
    return sorted({name for model in sections for name in model.model_fields} - {"source"})


def _sections(model: type[BaseModel], path: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """Every table of a target file as (TOML name, model): ``[promises]``,
    ``[[hooks.handler_errors]]`` ... (an array of tables written with double brackets)."""
    for name, info in model.model_fields.items():
        for inner in _models_in(info.annotation):
            table = f"{path}.{name}" if path else name
            shown = f"[[{table}]]" if _is_list(info.annotation) else f"[{table}]"
            yield shown, inner
            yield from _sections(inner, table)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _is_list(annotation: Any) -> bool:
    return get_origin(annotation) is list or any(_is_list(a) for a in get_args(annotation))


def _where_it_goes(name: str, here: str, model: type[BaseModel]) -> str | None:
    """``errors`` written where it is not a field but is one elsewhere: where it goes."""
    homes = sorted({table for table, section in _sections(model)
                    if name in section.model_fields and table.strip("[]") != here})
    if not homes:
        return None
    return f"`{name}` is not a field of this table; it goes in {' or '.join(homes)}"


def _fix_for(error: Mapping[str, Any], field: str, model: type[BaseModel] = BaseModel) -> str:
    docs = getattr(model, "DOCS", Target.DOCS)
    kind = error["type"]
    if kind == "missing":
        return f"add `{field.rsplit('.', 1)[-1]} = ...` (see {docs} for its meaning)"
    if kind == "extra_forbidden":
        here, _, name = field.rpartition(".")
        table = ".".join(part for part in here.split(".") if not part.isdigit())
        elsewhere = _where_it_goes(name, table, model)
        if elsewhere is not None:
            return f"{elsewhere} ({docs} lists every field)"
        close = difflib.get_close_matches(name, _known_field_names(), n=1, cutoff=0.7)
        hint = f"did you mean `{close[0]}`? " if close else ""
        return f"{hint}remove `{field}` or correct its spelling; {docs} lists every field"
    if kind in ("literal_error", "union_tag_invalid"):
        return f"use one of the allowed values: {error['msg'].split(':', 1)[-1].strip()}"
    if kind == "union_tag_not_found":
        return 'add `kind = "http"`, `kind = "sql"` or `kind = "recorder"` to [effects]'
    return f"correct the value as the message says ({docs} has a complete example)"


def target_model(data: Mapping[str, Any], *, source: str = "") -> type[Target]:
    """The model a target file's data is validated with: its front end's (a queue consumer's
    file says ``kind = "consumer"`` or has a ``[queue]`` table; the default kind's names none).
    A ``kind`` no front end answers to is refused, with the ways to say each kind."""
    kind = data.get("kind")
    named = [front for front in fronts() if front.kind != DEFAULT_KIND]
    if kind is not None and kind not in {front.kind for front in named}:
        ways = [front.choosing for front in named] + [front_named(DEFAULT_KIND).choosing]
        raise TargetFileError(source, [("kind", f"unknown kind {kind!r}", ", or ".join(ways))])
    return front_of_file(data).model()


def parse_target(data: Mapping[str, Any], *, source: str) -> Target:
    """Validate parsed TOML into a ``Target`` or raise ``TargetFileError`` with every problem."""
    model = target_model(data, source=source)
    try:
        return model.model_validate({**data, "source": source})
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"])
            message = str(error["msg"]).removeprefix("Value error, ")
            problems.append((field, message, _fix_for(error, field, model)))
        problems += [p for p in _whole_file_problems(model, data, exc) if p not in problems]
        raise TargetFileError(source, problems) from exc


def _whole_file_problems(model: type[Target], data: Mapping[str, Any],
                         error: ValidationError) -> list[tuple[str, str, str]]:
    """The rules over the whole file (``url`` or ``[start]``, ``[clock]`` or
    ``[hooks.clock]``...), which pydantic checks only once every table is valid, checked on the
    tables that are: one pass reports every problem, not a layer at a time.  A rule that needs
    a table at fault is left out; that table's own problem is reported."""
    failed = {str(e["loc"][0]) for e in error.errors() if e["loc"]}
    if not failed:  # the whole-file rules have spoken already
        return []
    values = {}
    for name, field in model.model_fields.items():
        if name in failed or name not in data:
            continue
        try:
            annotation: Any = (Annotated[(field.annotation, *field.metadata)]
                               if field.metadata else field.annotation)
            values[name] = TypeAdapter(annotation).validate_python(data[name])
        except ValidationError:
            failed.add(name)
    partial = model.model_construct(**values)
    for name in failed:  # absent, not defaulted: a rule reading it is skipped below
        partial.__dict__.pop(name, None)
    problems = []
    for decorator in model.__pydantic_decorators__.model_validators.values():
        if decorator.info.mode != "after":
            continue
        try:
            decorator.func(partial)
        except ValueError as exc:
            problems.append(("", str(exc), "correct the file as the message says "
                                           "(docs/targets.md has a complete example)"))
        except (AttributeError, TypeError):
            continue
    return problems


def saved_target(definition: Mapping[str, Any], *, source: str | None = None) -> Target:
    """A target as a run saved it (results.json's definition, a story's), validated again or
    refused with every problem.  Runs saved before the endpoint was left out of a target with
    ``[[operations]]`` hold both; there the endpoint is only the first operation."""
    data = dict(definition)
    if data.get("operations"):
        data.pop("endpoint", None)
    return parse_target(data, source=str(data.get("source", "")) if source is None else source)


def load_target(path: str | Path) -> Target:
    """Read and validate a target file; a bare name such as ``reference`` means a built-in one."""
    candidate = Path(path)
    if not candidate.exists() and (BUILTIN_TARGETS / f"{path}.toml").exists():
        candidate = BUILTIN_TARGETS / f"{path}.toml"
    try:
        text = candidate.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TargetFileError(
            str(path), [("", "the file does not exist", "check the path, or copy the example "
                         "in docs/targets.md")]
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        problem = ("", f"cannot read it: {exc}", "check the file's permissions and encoding")
        raise TargetFileError(str(path), [problem]) from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TargetFileError(
            str(path), [("", f"not valid TOML: {exc}", "fix the TOML syntax at that line")]
        ) from exc
    return parse_target(data, source=str(candidate))

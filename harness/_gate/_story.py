"""A finding's shortest story: the history events it cites, written as steps a person can read.

Hypothesis prints a failing state machine as the program that reproduces it
(``state = ...``, ``state.rule(...)``); a finding is printed the same way, from exactly the events
the checker cited as its evidence and nothing else.  Repetition is folded: copies sent at once
become one ``send_concurrently`` line, and identical retries with the same answer one ``retry``
line with a count.  Values (keys, bodies, tenants) are named once, at the top: a key by its value,
however the header spelled it (an sf-string is quoted on the wire), so one key is one variable.
A request's own headers (the slow or crash hook that made the story happen) are part of its
line, so the story reproduces as written, and it ends with the ledger's final count for each key
it tells.  The story only renders; the judgement, and which step mattered, are the checker's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from harness._history import Event
from harness._target import Target, encode_key
from harness.judging._findings import Finding
from harness.reports._hook_words import hooks_told, own_headers

__all__ = ["render_story"]

_SHOWN_BODY = 72
_COMMENT_AT = 48


@dataclass(frozen=True)
class _Attempt:
    invoke: Event
    completion: Event | None

    def signature(self) -> tuple[object, ...]:
        i = self.invoke
        return (i.key_header, i.tenant, i.body, i.method, i.path,
                tuple(sorted((i.headers or {}).items())))

    def answer(self) -> str:
        done = self.completion
        if done is None:
            return "never completed"
        if done.status is None:
            return f"no answer ({done.error or done.type})"
        return f"{done.status} {done.resource}" if done.resource else str(done.status)


class _Names:
    """Short names for the values a story repeats: k1 for a key, b1 for a body, t1 for a tenant."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._given: dict[tuple[str, str], str] = {}

    def of(self, prefix: str, value: str, shown: str | None = None, note: str = "") -> str:
        """The name of ``value``, declared (as ``shown``, else quoted, with ``note`` as its
        comment) on first use."""
        name = self._given.get((prefix, value))
        if name is None:
            name = f"{prefix}{sum(1 for p, _ in self._given if p == prefix) + 1}"
            self._given[(prefix, value)] = name
            literal = shown if shown is not None else repr(value)
            declaration = f"{name} = {literal}"
            self.lines.append(_with_comment(declaration, note) if note else declaration)
        return name

    def key(self, key: str, wire: str | None, target: Target) -> str:
        """The one name of ``key``, whichever event mentions it; the comment says how the
        header spelled it when that is not the value itself (an sf-string, say)."""
        spelled = wire if wire is not None and wire != key else None
        note = ""
        if spelled is not None:
            syntax = target.key.syntax
            how = f", an {syntax}" if spelled == encode_key(key, syntax) else ""
            note = f"sent as {spelled}{how}"
        return self.of("k", key, note=note)


def _body_literal(body: str) -> str:
    """JSON bodies as they were sent; anything else (hostile input, re-indented JSON) quoted."""
    if len(body) > _SHOWN_BODY:
        return f"{body[:_SHOWN_BODY]!r}  # the first {_SHOWN_BODY} of {len(body)} characters"
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return repr(body)
    return body if "\n" not in body else repr(body)


def _key_arg(invoke: Event, target: Target, names: _Names) -> str:
    if invoke.key is None and invoke.key_header is None:
        return "key=None"
    if invoke.key is None:  # only the header is known: its spelling is the value
        return "key=" + names.of("k", str(invoke.key_header))
    return "key=" + names.key(invoke.key, invoke.key_header, target)


def _call(attempt: _Attempt, target: Target, names: _Names, *, tenants: bool) -> list[str]:
    """The arguments that say which request this was, its own headers included."""
    invoke = attempt.invoke
    args = [_key_arg(invoke, target, names)]
    if tenants and invoke.tenant is not None:
        args.append("tenant=" + names.of("t", invoke.tenant))
    if invoke.body is not None:
        args.append("body=" + names.of("b", invoke.body, _body_literal(invoke.body)))
    if invoke.method and invoke.method != target.endpoint.method:
        args.append(f"method={invoke.method!r}")
    if invoke.path and invoke.path != target.endpoint.path:
        args.append(f"path={invoke.path!r}")
    own = own_headers(invoke, target)
    if own:
        args.append(f"headers={json.dumps(own, ensure_ascii=False)}")
    return args


def _hooks_used(attempt: _Attempt, target: Target) -> str:
    """``, its handler slowed by 1200 ms`` for a comment; empty without a hook."""
    return "".join(f", {words}" for words in hooks_told(attempt.invoke, target))


def _with_comment(code: str, comment: str) -> str:
    return f"{code.ljust(_COMMENT_AT)}  # {comment}"


def _batch_lines(batch: list[_Attempt], target: Target, names: _Names, *,
                 tenants: bool) -> list[str]:
    """One line per attempt; copies of one request sent at once (a burst) share one line."""
    first = batch[0]
    if len(batch) > 1 and all(a.signature() == first.signature()
                              and a.invoke.attempt == first.invoke.attempt for a in batch):
        args = ", ".join(_call(first, target, names, tenants=tenants))
        answers: dict[str, int] = {}
        for attempt in batch:
            answers[attempt.answer()] = answers.get(attempt.answer(), 0) + 1
        summary = ", ".join(a if n == 1 else f"{a} x{n}" for a, n in answers.items())
        hooks = _hooks_used(first, target)
        return [_with_comment(f"state.send_concurrently({args}, copies={len(batch)})",
                              f"{hooks[2:]}: " * bool(hooks) + f"-> {summary}")]
    lines = []
    for position, attempt in enumerate(batch):
        verb = "send" if (attempt.invoke.attempt or 1) == 1 else "retry"
        args = ", ".join(_call(attempt, target, names, tenants=tenants))
        label = f", {attempt.invoke.label}" if attempt.invoke.label else ""
        running = " (while the request above still runs)" if position else ""
        lines.append(_with_comment(f"state.{verb}({args})", f"attempt {attempt.invoke.attempt}"
                                   f"{label}{_hooks_used(attempt, target)}{running} "
                                   f"-> {attempt.answer()}"))
    return lines


def _nemesis_line(event: Event, names: _Names, target: Target) -> str | None:
    value = event.value
    if event.f in ("fault", "heal"):
        return f"state.{event.f}({json.dumps(str(value.get('fault')))})"
    if event.f == "crash":
        return f"state.crash(how={json.dumps(str(value.get('how')))})"
    if event.f == "restart":
        return "state.restart()"
    if event.f == "clock":
        return f"state.advance_clock(seconds={value.get('seconds')})"
    if event.f == "effects":
        key = "None" if event.key is None else names.key(event.key, None, target)
        if event.type != "ok":
            return _with_comment(f"state.charges(key={key})", f"unknown: {event.error}")
        ids = value.get("ids")
        shown = f": {', '.join(map(str, ids))}" if ids else ""
        return _with_comment(f"state.charges(key={key})", f"-> {value.get('count')}{shown}")
    if event.f == "store-size":
        return _with_comment("state.store_size()", f"-> {dict(value)}")
    return None


def _fold_retries(batches: list[list[_Attempt]], lines: list[str],
                  batch: list[_Attempt]) -> bool:
    """Fold a lone retry into the line above when it is the same request with the same answer,
    sent again by the same client or at the same attempt by another one; True when folded."""
    if not batches or len(batch) != 1 or not batches[-1]:
        return False
    previous, retry = batches[-1], batch[0]
    if not all(a.signature() == retry.signature() and a.answer() == retry.answer()
               and (a.invoke.attempt or 1) > 1 for a in previous):
        return False
    folded = [*previous, retry]
    attempts = [a.invoke.attempt or 0 for a in folded]
    clients = {a.invoke.process for a in folded}
    if len(clients) == 1 and attempts == list(range(attempts[0], attempts[0] + len(folded))):
        comment = f"attempts {attempts[0]}-{attempts[-1]} -> {retry.answer()} each"
    elif len(clients) == len(folded) and len(set(attempts)) == 1:
        comment = f"attempt {attempts[0]} by {len(folded)} clients -> {retry.answer()} each"
    else:
        return False
    previous.append(retry)
    lines[-1] = _with_comment(lines[-1].split("  # ", 1)[0].rstrip(), comment)
    return True


def _in_background(cited: Sequence[Event], completions: dict[int, Event]) -> set[int]:
    """The ops of lone requests that were still running when a later step of the story
    happened (a clock jump, another request's answer): the story starts them in the background
    and waits for them where their answer came, so it reads in the order things happened."""
    shown = {e.index for e in cited}
    ops = set()
    for position, event in enumerate(cited):
        if event.f != "request" or event.type != "invoke":
            continue
        done = completions.get(event.op)
        alone = ((position == 0 or cited[position - 1].type != "invoke"
                  or cited[position - 1].f != "request")
                 and (position + 1 == len(cited) or cited[position + 1].type != "invoke"
                      or cited[position + 1].f != "request"))
        if alone and done is not None and done.index in shown and any(
                e.index < done.index for e in cited[position + 1:]
                if e.index != done.index):
            ops.add(event.op)
    return ops


def _background_line(name: str, attempt: _Attempt, target: Target, names: _Names, *,
                     tenants: bool) -> str:
    args = ", ".join(_call(attempt, target, names, tenants=tenants))
    label = f", {attempt.invoke.label}" if attempt.invoke.label else ""
    return _with_comment(f"{name} = state.send_in_background({args})",
                         f"attempt {attempt.invoke.attempt}{label}"
                         f"{_hooks_used(attempt, target)}")


def _final_counts(cited: Sequence[Event], events: Sequence[Event]) -> list[Event]:
    """The ledger's last count for each key the story sends and does not count already: a
    story ends with how many charges its keys made."""
    told = [e.identity for e in cited if e.f == "request" and e.key is not None]
    counted = {e.identity for e in cited if e.f == "effects"}
    last = {e.identity: e for e in events if e.f == "effects"}
    return [last[i] for i in dict.fromkeys(told) if i not in counted and i in last]


def render_story(finding: Finding, events: Sequence[Event], target: Target) -> str:
    """The steps behind ``finding`` as Hypothesis-style lines; empty when it cites no events."""
    by_index = {e.index: e for e in events}
    cited = [by_index[i] for i in sorted(finding.events) if i in by_index]
    if not cited:
        return ""
    completions = {e.op: e for e in events if e.f == "request" and e.type != "invoke"}
    tenants = len({e.tenant for e in cited if e.f == "request"}) > 1
    names = _Names()
    steps: list[str] = []
    batches: list[list[_Attempt]] = []
    pending: list[_Attempt] = []

    def flush() -> None:
        if pending:
            batch = list(pending)
            pending.clear()
            if not _fold_retries(batches, steps, batch):
                lines = _batch_lines(batch, target, names, tenants=tenants)
                steps.extend(lines)
                # One entry per line, so a retry folds into the line it follows.
                batches.extend([[a] for a in batch] if len(lines) > 1 else [batch])

    background = _in_background(cited, completions)
    waiting: dict[int, str] = {}  # op -> the name of a request sent in the background
    for event in cited:
        if event.f == "request" and event.type == "invoke":
            attempt = _Attempt(event, completions.get(event.op))
            if event.op not in background:
                pending.append(attempt)
                continue
            flush()
            waiting[event.op] = f"o{len(waiting) + 1}"
            steps.append(_background_line(waiting[event.op], attempt, target, names,
                                          tenants=tenants))
            batches.append([])
            continue
        flush()
        if event.f == "request" and event.op in waiting:
            done = _Attempt(event, event)
            steps.append(_with_comment(f"state.wait({waiting[event.op]})",
                                       f"-> {done.answer()}"))
            batches.append([])
        elif event.f != "request":
            line = _nemesis_line(event, names, target)
            if line is not None:
                steps.append(line)
                batches.append([])
    flush()
    for count in _final_counts(cited, events):
        line = _nemesis_line(count, names, target)
        if line is not None:
            steps.append(line)
    header = f"state = IdempotencyMachine(target={json.dumps(target.name)})"
    return "\n".join([header, *names.lines, *steps, "state.teardown()"])

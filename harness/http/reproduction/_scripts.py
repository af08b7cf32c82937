"""An HTTP finding's reproduction script: its story as a person reads it, replayed after the run.

A script in the report directory (``reproduce/<scenario>-<n>.sh``) carries the reproduction of
one key's findings (``_reproduction.py``): it plays the story again through the harness against
a fresh instance of the target, started as the run started it (or the instance at the URL it is
given), and exits 1 when a property of the findings broke again, 0 when none did this time, and
2 when the story could not be played or judged.  Its comments tell the story step by step, with
the ``curl`` commands that send the same requests by hand.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from harness._durations import format_duration
from harness._history import Event
from harness._target import Target, render_template
from harness.http.reproduction._reproduction import (
    NO_REPLAY,
    NOT_REPRODUCED,
    REPRODUCED,
    Reproduction,
)
from harness.reproduction._scripts import comment_lines

__all__ = ["curl_for", "script_for"]

def curl_for(invoke: Event, target: Target, base_url: str) -> str:
    """``curl`` for one recorded invocation, headers and body exactly as the harness sent them."""
    return shlex.join(_curl_words(invoke, target, base_url.rstrip("/")))


def script_for(reproduction: Reproduction, target: Target, *, klass: str) -> str:
    """The bash script that replays ``reproduction`` (of findings of class ``klass``) through
    the harness; its comments tell what the run did."""
    python = shlex.quote(sys.executable)
    properties = ", ".join(reproduction.properties)
    lines = [
        "#!/usr/bin/env bash",
        f"# idem-harness: reproduce {properties} ({klass}) of scenario {reproduction.scenario}, "
        f"seed {reproduction.seed}, target {target.name}.",
        *(line for message in reproduction.messages for line in comment_lines(message)),
        "#",
        *_story_lines(reproduction, target),
        "#",
        "# Usage: bash THIS_SCRIPT [BASE_URL]",
        *comment_lines(
            f"Plays the story again through the harness (its client, Toxiproxy's faults, kills, "
            f"restarts and clock moves, at the moments the run made them) against "
            f"{_started_as(reproduction)}, judges it, and says whether {properties} broke again: "
            f"exit {REPRODUCED} if one did, {NOT_REPRODUCED} if none did this time (a race the "
            f"run lost can go the other way: run it again before calling the flaw fixed), "
            f"{NO_REPLAY} if the story could not be played or judged. BASE_URL: a fresh "
            "instance you started yourself, with nothing stored yet (a story that kills, "
            "restarts or cuts the target's database then cannot be played). The replay's "
            "report is removed at the end unless IDEM_REPLAY_REPORT names a directory to keep "
            "it in."),
        *_by_hand(reproduction, target),
        "set -euo pipefail",
        "",
        'WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/idem-reproduce-XXXXXX")',
        "trap 'rm -rf \"$WORKDIR\"' EXIT",
        "trap 'exit 130' INT TERM  # through the EXIT trap: nothing is left behind",
        "cat >\"$WORKDIR/reproduction.json\" <<'IDEM_REPRODUCTION'",
        reproduction.to_json().rstrip("\n"),
        "IDEM_REPRODUCTION",
        "status=0",
        f"{python} -m harness.cli reproduce \"$WORKDIR/reproduction.json\" "
        '${IDEM_REPLAY_REPORT:+--report-dir "$IDEM_REPLAY_REPORT"} ${1:+--url "$1"} '
        "|| status=$?",
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


def _started_as(reproduction: Reproduction) -> str:
    reference = reproduction.reference
    if reference is not None:
        flaw = reference.get("flaw")
        store = ("a fresh PostgreSQL database (IDEM_PG_DSN, or a throwaway server the harness "
                 "starts, as --postgres did)" if reference.get("store") == "postgresql"
                 else "a fresh SQLite store")
        return (f"the reference server{f' with --flaw {flaw}' if flaw else ''} on {store}, "
                "started as --reference starts it")
    target = reproduction.target
    if target.get("start") is not None:
        return "a fresh instance of the target, started as its file (carried below) says"
    return f"the running target at {target.get('url')} (it should hold nothing stored yet)"


def _story_lines(reproduction: Reproduction, target: Target) -> list[str]:
    if reproduction.plays_scenario:
        return comment_lines(f"The finding is about the whole scenario: the script plays "
                             f"{reproduction.scenario} again from the catalog, with the run's "
                             f"seed {reproduction.seed}.")
    events = reproduction.events
    completions = {e.op: e for e in events if e.f == "request" and e.type != "invoke"}
    origin = events[0].time
    lines = ["# In the run (the replay does each step again at the same moment):"]
    for event in events:
        if event.f == "request" and event.type != "invoke":
            continue
        told = _visible(_told(event, completions.get(event.op), target))
        lines.append(f"#   +{event.time - origin:7.3f}s  {told}")
    return lines


def _told(event: Event, completion: Event | None, target: Target) -> str:
    """One step of the story in words."""
    value: Mapping[str, Any] = event.value or {}
    if event.f == "request":
        sent = [f"{event.method} {event.path}", f"{target.key.header}: {event.key_header}"
                if event.key_header is not None else "no key"]
        if event.tenant is not None:
            sent.append(f"tenant {event.tenant}")
        sent += [f"{name}: {v}" for name, v in (event.headers or {}).items()]
        if completion is None:
            return " · ".join(sent) + " -> no answer recorded"
        took = format_duration(max(completion.time - event.time, 0.0))
        if completion.status is None:
            answer = f"no answer ({completion.error}) after {took}"
        else:
            named = f" {completion.resource}" if completion.resource else ""
            answer = f"{completion.status}{named} after {took}"
        return " · ".join(sent) + f" -> {answer}"
    if event.f == "crash" and "after_write" not in value:
        how = str(value.get("how", "SIGKILL"))
        return ("the target was killed (SIGKILL)" if how == "SIGKILL"
                else f"the target crashed by itself ({how.replace('hook:', 'its crash hook, ')})")
    if event.f == "restart":
        return "the target was started again"
    if event.f == "clock":
        return f"the target's clock moved {format_duration(float(value.get('seconds', 0)))} on"
    if "after_write" in value:  # the store proxy's, at one of the target's writes
        kinds = ", ".join(str(k) for k in value.get("kinds", ())) or "a write"
        what = "struck" if event.f in ("fault", "crash") else "released"
        return (f"{value.get('fault')} {what}: the target's write "
                f"{value.get('write', value.get('after_write'))} ({kinds}) committed, and the "
                "store's acknowledgement was held from it (the harness's store proxy)")
    if event.f in ("fault", "heal"):
        verb = "on" if event.f == "fault" else "healed"
        return f"fault {value.get('fault')} {verb} (Toxiproxy)"
    if event.f == "effects":
        return f"the ledger: {value.get('count', '?')} charge(s) for the key"
    if event.f == "store-size":
        return f"the key table: {value.get('rows', '?')} row(s)"
    return event.f


def _by_hand(reproduction: Reproduction, target: Target) -> list[str]:
    """The story's requests and clock moves as ``curl`` commands, for a person at a terminal;
    faults, kills and restarts are the harness's to play, so they are only named."""
    if reproduction.plays_scenario:
        return []
    events = reproduction.events
    ends = {e.op: e.time for e in events if e.f == "request" and e.type != "invoke"}
    steps = [e for e in events if e.f != "request" or e.type == "invoke"]
    lines = ["#", "# The same requests by hand, against a fresh instance at $BASE ('&': the run "
                  "went on while it ran):"]
    for position, event in enumerate(steps):
        if event.f == "request":
            following = steps[position + 1].time if position + 1 < len(steps) else float("inf")
            background = ends.get(event.op, float("inf")) > following
            command = _command(_curl_words(event, target, "$BASE"))
            lines.append(f"#   {command}{' &' if background else ''}")
        elif event.f == "clock" and target.hooks.clock is not None:
            lines.append(f"#   {_clock_call(event, target)}")
        elif event.f in ("crash", "restart", "fault", "heal"):
            lines.append(f"#   # {_visible(_told(event, None, target))}")
    return lines


def _clock_call(event: Event, target: Target) -> str:
    hook = target.hooks.clock
    assert hook is not None
    seconds = event.value.get("seconds", 0)
    path = render_template(hook.path, {"seconds": seconds})
    words = ["curl", "-sS", "-X", hook.method, f"$BASE{path}"]
    if hook.body:
        words += ["-H", "Content-Type: application/json", "--data-raw",
                  json.dumps(render_template(hook.body, {"seconds": seconds}))]
    return _command(words)


def _curl_words(invoke: Event, target: Target, base: str) -> list[str]:
    sent = invoke.headers or {}
    words = ["curl", "-i", "-X", invoke.method or target.endpoint.method,
             f"{base}{invoke.path or target.endpoint.path}"]
    if not any(name.lower() == "content-type" for name in sent):  # the usual JSON body
        words += ["-H", "Content-Type: application/json"]
    for name, value in sent.items():
        words += ["-H", f"{name}: {value}"]
    if invoke.key_header is not None:
        words += ["-H", f"{target.key.header}: {invoke.key_header}"]
    if invoke.tenant is not None and target.tenant is not None:
        words += ["-H", f"{target.tenant.header}: "
                  + target.tenant.format.replace("{tenant}", invoke.tenant)]
    return [*words, "--data-raw", invoke.body or ""]


def _command(words: Sequence[str]) -> str:
    """``words`` quoted for bash, a leading ``$BASE`` left to expand."""
    return " ".join(_word(word) for word in words)


def _word(word: str) -> str:
    if word.startswith("$BASE"):
        rest = word.removeprefix("$BASE")
        return '"$BASE"' + (_quoted(rest) if rest else "")
    return _quoted(word)


def _quoted(word: str) -> str:
    """``word`` for bash on one line: as ``shlex`` quotes it, or, when it holds a line break or
    another control character (a body sent with newlines, a hostile key), as ``$'...'``."""
    if all(character.isprintable() for character in word):
        return shlex.quote(word)
    return "$'" + "".join(_escape(character) for character in word) + "'"


_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _escape(character: str) -> str:
    if character in _ESCAPES:
        return _ESCAPES[character]
    if character.isprintable():
        return character
    code = ord(character)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _visible(text: str) -> str:
    """``text`` with its control characters spelled out, fit for a comment line."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)

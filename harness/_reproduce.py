"""Reproductions that work after the run: the requests behind a finding, as a person replays them.

A run's target listens on a port that is gone when the run ends, so a finding's reproduction is
a script in the report directory, not one ``curl`` line: it starts the target again as the run
did (or takes the URL of a fresh instance), sends every request of the finding's key in the
order the run sent them, each with every header the harness sent (fault headers included),
requests that overlapped in the run at once, kills and restarts the target and moves its clock
where the run did, and prints the effect count at the end.  Faults of the network (a response
cut by Toxiproxy) cannot be played by ``curl``; they are comments where they happened, which is
enough for the server: it saw the same requests.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import textwrap
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness._analysis import describe_identity
from harness._findings import Finding
from harness._history import NEMESIS, Event
from harness._target import HttpEffects, RecorderEffects, Target, render_template

__all__ = ["comment_lines", "curl_for", "script_for", "script_path"]

#: Stand-ins rendered into the start command, then turned into shell variables.
_SHELL_VALUES = {"port": "@@PORT@@", "workdir": "@@WORKDIR@@", "instance": "0",
                 "python": sys.executable}
_SHELL_NAMES = {"@@PORT@@": "$PORT", "@@WORKDIR@@": "$WORKDIR", "@@BASE@@": "$BASE"}
_STAND_IN = re.compile("(" + "|".join(_SHELL_NAMES) + ")")
#: Each request's own time limit in the script (curl's, per transfer).
_MAX_TIME = "--max-time 30"


def curl_for(invoke: Event, target: Target, base_url: str) -> str:
    """``curl`` for one recorded invocation, headers and body exactly as the harness sent them."""
    return shlex.join(_curl_words(invoke, target, base_url.rstrip("/")))


def script_path(scenario: str, number: int) -> str:
    """Where, inside the report directory, the script of a scenario's ``number``-th finding is."""
    return f"reproduce/{scenario}-{number}.sh"


def script_for(finding: Finding, events: Sequence[Event], target: Target, *, scenario: str,
               seed: int, base_url: str) -> str:
    """A bash script that plays the finding's story against a fresh instance of the target."""
    story = _story_events(finding, events)
    lines = [
        "#!/usr/bin/env bash",
        f"# idem-harness: reproduce {finding.property} ({finding.klass}) of scenario {scenario}, "
        f"seed {seed}, target {target.name}.",
        *comment_lines(finding.message),
        "#",
        "# Usage: bash THIS_SCRIPT [BASE_URL]",
        "#   BASE_URL: a fresh instance of the target, with nothing stored yet. Without it the",
        "#   script starts the target as the run did, on a free port, and stops it at the end.",
        "set -euo pipefail",
        "",
        *_starting(target, base_url),
        "",
        f'send() {{ printf "\\n>>> %s\\n" "$*" >&2; curl -sS -i {_MAX_TIME} "$@" || true; echo; }}',
        "# Requests that overlapped in the run go out from one curl, in parallel: separate curl",
        "# processes would start milliseconds apart, long enough to lose a race the run won.",
        'send_at_once() { printf "\\n>>> at once: %s\\n" "$*" >&2',
        '                 curl -sS --parallel --parallel-immediate "$@" || true; echo; }',
        "",
        *_playing(story, target),
        "",
        *_counting(finding, story, target),
    ]
    return "\n".join(lines) + "\n"


def _story_events(finding: Finding, events: Sequence[Event]) -> list[Event]:
    """The finding's requests (every request of its key, or the ones it cites when it has no
    key) and what the nemesis did to the process or the clock from the first to the last."""
    cited = set(finding.events)
    by_op: dict[int, list[Event]] = {}
    for event in events:
        if event.f == "request":
            by_op.setdefault(event.op, []).append(event)
    wanted = {op for op, pair in by_op.items()
              if any(_of_key(e, finding.key) or e.index in cited for e in pair)}
    requests = [e for e in events if e.f == "request" and e.op in wanted]
    if not requests:
        return []
    first, last = requests[0].time, max(e.time for e in requests)
    nemesis = [e for e in events if e.process == NEMESIS and first <= e.time <= last
               and e.f in ("crash", "restart", "clock", "fault", "heal", "exit")]
    return sorted(requests + nemesis, key=lambda e: e.index)


def _of_key(event: Event, key: str | None) -> bool:
    """A finding names its key with its tenant (``tenant/key``) when the target has tenants."""
    return key is not None and key in (event.key, describe_identity(event.identity))


def _starting(target: Target, base_url: str) -> list[str]:
    start = target.start
    why_not = _cannot_start(target)
    if why_not:
        return [f"# {why_not}", f'BASE="${{1:-{base_url}}}"',
                f'echo "playing against $BASE ({why_not.rstrip(".")})" >&2',
                "start_target() { :; }", "kill_target() { echo 'kill the target now' >&2; }"]
    assert start is not None
    command = " ".join(_shell_word(render_template(part, _SHELL_VALUES)) for part in start.command)
    env = " ".join(f"{name}={_shell_word(render_template(value, _SHELL_VALUES))}"
                   for name, value in start.env.items())
    cwd = start.cwd if start.cwd is None or not target.source else _absolute_cwd(target)
    ready = f"$BASE{start.ready_path}" if start.ready == "http" else None
    wait_ready = (f'curl -fs -o /dev/null "{ready}"' if ready
                  else 'bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null')
    return [
        "TARGET_PID=",
        "start_target() {",
        f"  ( {f'cd {shlex.quote(cwd)} && ' if cwd else ''}exec setsid env {env} {command} )"
        ' >>"$WORKDIR/target.log" 2>&1 &',
        "  TARGET_PID=$!",
        f"  for _ in $(seq 300); do {wait_ready} && return 0; sleep 0.1; done",
        '  echo "the target did not start; its log: $WORKDIR/target.log" >&2; exit 1',
        "}",
        "kill_target() {",
        '  [[ -n "$TARGET_PID" ]] && { kill -KILL -- "-$TARGET_PID" 2>/dev/null || true; '
        'wait "$TARGET_PID" 2>/dev/null || true; }',
        "}",
        'if [[ $# -ge 1 ]]; then',
        '  BASE="$1"; start_target() { :; }',
        "  kill_target() { echo 'kill and restart the target now, then press enter' >&2; "
        "read -r; }",
        "else",
        "  PORT=$(" + shlex.quote(sys.executable) + " -c 'import socket; s = socket.socket(); "
        's.bind(("127.0.0.1", 0)); print(s.getsockname()[1])\')',
        '  WORKDIR=$(mktemp -d); BASE="http://127.0.0.1:$PORT"',
        '  trap \'kill_target; rm -rf "$WORKDIR"\' EXIT',
        "  trap 'exit 130' INT TERM  # through the EXIT trap: the target never outlives it",
        "  start_target",
        "fi",
    ]


def _cannot_start(target: Target) -> str | None:
    if target.start is None:
        return "The target runs elsewhere: give BASE_URL, or run it on a fresh store first."
    if target.store_proxy is not None:
        return ("The run's database is not kept: give BASE_URL of an instance on an empty "
                "database.")
    if isinstance(target.effects, RecorderEffects):
        return ("The target reports its effects to the harness's recorder: give BASE_URL of an "
                "instance started by hand.")
    return None


def _absolute_cwd(target: Target) -> str:
    assert target.start is not None and target.start.cwd is not None
    cwd = Path(target.start.cwd)
    return str(cwd if cwd.is_absolute() else Path(target.source).absolute().parent / cwd)


def _playing(story: Sequence[Event], target: Target) -> list[str]:
    lines: list[str] = []
    for group in _groups(story):
        first = group[0]
        if first.f != "request":
            lines += _nemesis_lines(first, target)
            continue
        requests = [e for e in group if e.type == "invoke"]
        commands = [_command(_curl_words(e, target, "@@BASE@@")[1:]) for e in requests]
        if len(commands) == 1:
            lines.append(f"send {commands[0]}")
        else:
            lines.append(f"# {len(commands)} requests that overlapped in the run, sent at once:")
            lines.append("send_at_once " + " --next ".join(f"{_MAX_TIME} {c}" for c in commands))
    return lines


def _groups(story: Sequence[Event]) -> Iterator[list[Event]]:
    """Nemesis events alone; requests grouped with every request that overlapped them."""
    ends = {e.op: e.time for e in story if e.f == "request" and e.type != "invoke"}
    group: list[Event] = []
    open_until = -1.0
    for event in story:
        if event.f != "request":
            if group:
                yield group
                group, open_until = [], -1.0
            yield [event]
            continue
        if event.type != "invoke":
            continue
        if group and event.time > open_until:
            yield group
            group = []
        group.append(event)
        open_until = max(open_until, ends.get(event.op, float("inf")))
    if group:
        yield group


def _nemesis_lines(event: Event, target: Target) -> list[str]:
    value: Mapping[str, Any] = event.value or {}
    if event.f == "crash":
        return [f"# the target crashed here ({value.get('how', 'killed')})", "kill_target"]
    if event.f == "restart":
        return ["# started again on the same port", "start_target"]
    if event.f == "exit":
        return [f"# the target exited by itself here (code {value.get('code')})"]
    if event.f == "clock":
        seconds = value.get("seconds", 0)
        hook = target.hooks.clock
        if hook is None:
            return [f"# the target's clock was moved {seconds} s forward here"]
        path = render_template(hook.path, {"seconds": seconds})
        words = ["curl", "-sS", "-X", hook.method, f"@@BASE@@{path}"]
        if hook.body:
            words += ["-H", "Content-Type: application/json", "--data-raw",
                      json.dumps(render_template(hook.body, {"seconds": seconds}))]
        line = _command(words)
        return [f"# the target's clock moved {seconds} s forward here", line, "echo"]
    if event.f == "store-write":
        kinds = ", ".join(str(k) for k in value.get("kinds", ())) or "a write"
        return [f"# the target's write {value.get('write')} ({kinds}) committed here"]
    if "after_write" in value:  # a fault at a write: the store proxy's, not Toxiproxy's
        if event.f != "fault":
            return []
        kinds = ", ".join(str(k) for k in value.get("kinds", ())) or "a write"
        return [f"# {value.get('fault')}: the target's write {value.get('write')} ({kinds}) "
                "committed, and the store's acknowledgement was dropped and the link cut (the "
                "harness's store proxy; curl cannot play it, the server saw the same requests)"]
    what = value.get("fault") or value.get("name") or value.get("type") or "a network fault"
    verb = "on" if event.f == "fault" else "healed"
    return [f"# network fault {what} {verb} here (Toxiproxy; curl cannot play it, the server "
            "saw the same requests)"]


def _counting(finding: Finding, story: Sequence[Event], target: Target) -> list[str]:
    effects = target.effects
    if finding.key is None or not isinstance(effects, HttpEffects):
        return ["# count the side effects of this key in the target's store to see the finding"]
    request = next((e for e in story if e.f == "request" and _of_key(e, finding.key)), None)
    if request is None or request.key is None:
        return ["# count the side effects of this key in the target's store to see the finding"]
    values = {"key": request.key, "tenant": request.tenant or ""}
    query = {name: str(render_template(v, values)) for name, v in effects.query.items()}
    url = str(render_template(effects.url, {"port": "@@PORT@@", "workdir": "@@WORKDIR@@"}))
    absolute = url if "://" in url else f"@@BASE@@{url}"
    words = ["curl", "-sS", "-G", absolute, *(w for n, v in query.items()
                                              for w in ("--data-urlencode", f"{n}={v}"))]
    line = _command(words)
    return ['printf "\\n>>> the side effects of this key:\\n" >&2', line, "echo"]


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


def _shell_word(value: object) -> str:
    """``value`` quoted for bash, its stand-ins (``@@PORT@@``...) turned into ``"$PORT"``."""
    pieces = _STAND_IN.split(str(value))
    words = [f'"{_SHELL_NAMES[piece]}"' if piece in _SHELL_NAMES else shlex.quote(piece)
             for piece in pieces if piece]
    return "".join(words) or "''"


def _command(words: Sequence[str]) -> str:
    return " ".join(_shell_word(word) for word in words)


def comment_lines(text: str, width: int = 96) -> list[str]:
    """``text`` as bash comment lines of at most ``width`` characters of text each."""
    return [f"# {line}" for line in textwrap.wrap(" ".join(text.split()), width) or [""]]

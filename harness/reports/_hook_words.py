"""What a request's own headers asked of the target, in words.

A scenario makes things happen through the hooks the target file declares: a header that slows
the handler, one that kills the server at a named point, one that makes the handler fail.  The
shortest story prints those headers so it reproduces as written, and the demo's narrator says
what they did, so a trainee knows why the original was still running or the server died.
"""

from __future__ import annotations

from harness._history import Event
from harness._target import Target

__all__ = ["hook_words", "hooks_told", "own_headers"]


def own_headers(invoke: Event, target: Target) -> dict[str, str]:
    """The headers ``invoke`` carried beyond those every request to its operation carries: a
    hook's, or a scenario's own."""
    operation = target.operation_for(invoke.method, invoke.path) or target.endpoint
    usual = {name.lower(): value for name, value in operation.headers.items()}
    return {name: value for name, value in (invoke.headers or {}).items()
            if usual.get(name.lower()) != value}


def _slowed_by(template: str, value: str) -> str:
    """``1200 ms`` from the value ``1200`` of the template ``{ms}``; the value as sent when the
    template says otherwise."""
    before, marker, after = template.partition("{ms}")
    middle = value[len(before):len(value) - len(after)] if marker else ""
    if (marker and value.startswith(before) and value.endswith(after) and middle.isdigit()):
        return f"{middle} ms"
    return value


def hook_words(name: str, value: str, target: Target) -> str | None:
    """What the header ``name: value`` asks of ``target``, or None when it is none of its
    hooks."""
    hooks, wanted = target.hooks, name.lower()
    if hooks.slow is not None and hooks.slow.header.lower() == wanted:
        return f"its handler slowed by {_slowed_by(hooks.slow.value, value)}"
    crash = hooks.crash
    if crash is not None and (crash.header or "").lower() == wanted:
        point = next((p for p, v in crash.points.items() if v == value), None)
        if point is not None:
            return f"set to kill the server {point}"
    for fault in hooks.handler_errors:
        if fault.header.lower() == wanted and fault.value == value:
            return f"its handler set to fail ({fault.name}, {fault.when})"
    error = hooks.handler_error
    if error is not None and error.header.lower() == wanted and error.value == value:
        return "its handler set to fail"
    return None


def hooks_told(invoke: Event, target: Target) -> list[str]:
    """What each hook header of ``invoke`` asked for, in the order sent."""
    return [words for name, value in own_headers(invoke, target).items()
            if (words := hook_words(name, value, target)) is not None]

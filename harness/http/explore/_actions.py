"""The operations an HTTP service's story is made of, as plain data.

The state machine draws them, the world performs them, a story file stores them and ``replay``
reads them back: one vocabulary for all four, so a saved story is exactly what ran.  Each
action prints as the Hypothesis-style call a reader sees in the story
(``o1 = state.request(k1, tenant='a', body={...})``).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from harness.explore._actions import ActionModel, Clock, FaultOff, FaultOn
from harness.explore._keys import KeyPlan

__all__ = [
    "Action",
    "AfterWriteFault",
    "AwaitAnswers",
    "Burst",
    "BurstAgain",
    "Change",
    "Crash",
    "HandlerFault",
    "HostileBody",
    "Keyless",
    "NewRequest",
    "Overlap",
    "Retry",
    "Reuse",
    "Slow",
    "Spelling",
    "StepKind",
    "Wait",
    "kind_of",
    "short_json",
]

#: How a retry writes the same JSON: as sent, keys reversed, reversed and re-indented, or with
#: every non-ASCII character escaped.  All four are the same request (P4).
Spelling = Literal["as-sent", "keys-reversed", "reindented", "escaped"]
#: What a reuse changes: the body, one field of it, the operation (another declared one
#: sharing the key space, with the same body where it takes the same fields), or the query
#: string.  "path" and "method" are only read from stories saved before issue 13: a made-up
#: route proves nothing about a service, so they are no longer drawn.
Change = Literal["body", "field", "operation", "query", "path", "method"]
StepKind = Literal["request", "retry", "reuse", "burst", "keyless", "fault", "heal", "clock",
                   "crash", "hostile", "wait", "overlap", "handler-error", "after-write"]

_BODY_SHOWN = 72


def short_json(value: Any) -> str:
    """A body as a reader wants it in one line: compact, cut after a few dozen characters."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _BODY_SHOWN else text[: _BODY_SHOWN - 1] + "…"


class NewRequest(ActionModel):
    """A new operation: a request with a key the story has not sent before in this tenant."""

    op: Literal["request"] = "request"
    id: str
    tenant: str
    key: KeyPlan
    body: Any

    def text(self) -> str:
        return (f"{self.id} = state.request({self.key.name}, tenant={self.tenant!r}, "
                f"body={short_json(self.body)})")


class Retry(ActionModel):
    """The same request again, with the same key: it must be answered from the stored response."""

    op: Literal["retry"] = "retry"
    id: str
    spelling: Spelling = "as-sent"
    #: Sent once the slowed requests have answered: the client waited for its own request,
    #: which outlived its lease with no one taking over (zombie-original's story).
    once_answered: bool = False

    def text(self) -> str:
        how = "" if self.spelling == "as-sent" else f", spelling={self.spelling!r}"
        after = ", once_answered=True" if self.once_answered else ""
        return f"state.retry({self.id}{how}{after})"


class Reuse(ActionModel):
    """The key of an earlier operation with another body, one field changed (``field``), sent
    to another declared operation in the same key space (``operation`` names it), or with
    another query string; ``method``, ``path`` and ``body`` are what goes.  It must get the
    mismatch status."""

    op: Literal["reuse"] = "reuse"
    id: str
    change: Change
    body: Any = None
    path: str | None = None
    method: str | None = None
    operation: str | None = None
    field: str | None = None

    def text(self) -> str:
        shown = {"body": f"body={short_json(self.body)}", "path": f"path={self.path!r}",
                 "method": f"method={self.method!r}",
                 "operation": f"operation={self.operation!r}, body={short_json(self.body)}",
                 "field": f"field={self.field!r}, body={short_json(self.body)}",
                 "query": f"path={self.path!r}",
                 }[self.change]
        return f"state.reuse({self.id}, {shown})"


class Burst(ActionModel):
    """A new operation sent as several identical requests released at the same instant."""

    op: Literal["burst"] = "burst"
    id: str
    tenant: str
    key: KeyPlan
    copies: int = Field(ge=2, le=16)
    body: Any

    def text(self) -> str:
        return (f"{self.id} = state.burst({self.key.name}, copies={self.copies}, "
                f"tenant={self.tenant!r}, body={short_json(self.body)})")


class BurstAgain(ActionModel):
    """An earlier operation's request sent again as several copies released together (after
    its retention has run out, at most one of them may execute)."""

    op: Literal["burst-again"] = "burst-again"
    id: str
    copies: int = Field(ge=2, le=16)

    def text(self) -> str:
        return f"state.burst_again({self.id}, copies={self.copies})"


class Overlap(ActionModel):
    """A new operation and, ``after_ms`` later while it is still being handled (the delay is
    drawn inside the target's measured latency, so no slow hook is needed), its retry, or the
    same key with another body (``reuse``): the second must get the in-progress status, the
    mismatch status or the replay, never run as well."""

    op: Literal["overlap"] = "overlap"
    id: str
    tenant: str
    key: KeyPlan
    body: Any
    after_ms: int = Field(ge=0, le=60_000)
    second: Literal["retry", "reuse"] = "retry"
    other_body: Any = None
    #: The second leaves only once the first is answered: the order a stagger longer than the
    #: handling gives, which a replay tells for sure where the drawn story raced (a stagger
    #: says when the second leaves, not that it meets the first still running).
    in_order: bool = False

    def text(self) -> str:
        what = ("retry" if self.second == "retry"
                else f"reuse, body={short_json(self.other_body)}")
        ordered = ", in_order=True" if self.in_order else ""
        return (f"{self.id} = state.overlap({self.key.name}, after_ms={self.after_ms}, "
                f"then={what}, tenant={self.tenant!r}, body={short_json(self.body)}{ordered})")


class HandlerFault(ActionModel):
    """A new operation whose handler fails the way the target file's fault ``fault`` makes
    it (an exception before or after the work, an error answer); its clients retry after."""

    op: Literal["handler-error"] = "handler-error"
    id: str
    tenant: str
    key: KeyPlan
    fault: str
    body: Any

    def text(self) -> str:
        return (f"{self.id} = state.handler_error({self.key.name}, fault={self.fault!r}, "
                f"tenant={self.tenant!r}, body={short_json(self.body)})")


class AfterWriteFault(ActionModel):
    """A new operation whose store link is cut (or whose server is killed) right after the
    store commits its ``write``-th write, as the store proxy that reads the store's protocol
    sees them: the write is in, and the server never hears so."""

    op: Literal["after-write"] = "after-write"
    id: str
    tenant: str
    key: KeyPlan
    write: int = Field(ge=1, le=16)
    fault: Literal["cut", "kill"]
    body: Any

    def text(self) -> str:
        return (f"{self.id} = state.{self.fault}_after_write({self.key.name}, write={self.write}, "
                f"tenant={self.tenant!r}, body={short_json(self.body)})")


class Keyless(ActionModel):
    """A request without an idempotency key."""

    op: Literal["keyless"] = "keyless"
    id: str
    tenant: str
    body: Any

    def text(self) -> str:
        return f"{self.id} = state.keyless(tenant={self.tenant!r}, body={short_json(self.body)})"


class HostileBody(ActionModel):
    """A request with a fresh key and a body the target must refuse (``why``: what is wrong
    with it).  Judged by P10 only (``hostile:<why>``), never retried or reused: a service may
    rightly reject a bad body before it claims the key, so the key's later answers say
    nothing about replay."""

    op: Literal["bad-body"] = "bad-body"
    id: str
    tenant: str
    key: KeyPlan
    body: Any
    why: str

    def text(self) -> str:
        return (f"state.bad_body({self.key.name}, tenant={self.tenant!r}, "
                f"body={short_json(self.body)})  # {self.why}")


class Wait(ActionModel):
    """Real time passes (a target without a clock hook): past a short lease, say."""

    op: Literal["wait"] = "wait"
    seconds: float = Field(gt=0, le=120)
    why: str = ""

    def text(self) -> str:
        note = f"  # {self.why}" if self.why else ""
        return f"state.wait({self.seconds:g}){note}"


class AwaitAnswers(ActionModel):
    """Real time passes until every slowed request has answered: what a clock jump left out
    of a story leaves in its place when those requests had answered before the next step, so
    that the story without the jump keeps the order its requests met in."""

    op: Literal["await-answers"] = "await-answers"
    why: str = ""

    def text(self) -> str:
        note = f"  # {self.why}" if self.why else ""
        return f"state.await_answers(){note}"


class Crash(ActionModel):
    """A new operation during which the target dies at ``point``; then it is restarted."""

    op: Literal["crash"] = "crash"
    id: str
    tenant: str
    key: KeyPlan
    point: str
    body: Any

    def text(self) -> str:
        return (f"{self.id} = state.crash({self.key.name}, point={self.point!r}, "
                f"tenant={self.tenant!r}, body={short_json(self.body)})")


class Slow(ActionModel):
    """A new operation whose handler is slowed (the slow hook); it runs on in the background
    while the next steps happen."""

    op: Literal["slow"] = "slow"
    id: str
    tenant: str
    key: KeyPlan
    #: Up to five minutes: a story told again in real time slows a request by its waits.
    delay_ms: int = Field(gt=0, le=300_000)
    body: Any

    def text(self) -> str:
        return (f"{self.id} = state.slow_request({self.key.name}, delay_ms={self.delay_ms}, "
                f"tenant={self.tenant!r}, body={short_json(self.body)})")


Action = Annotated[
    NewRequest | Retry | Reuse | Burst | BurstAgain | Overlap | HandlerFault | AfterWriteFault
    | Keyless | HostileBody | FaultOn | FaultOff | Clock | Wait | AwaitAnswers | Crash | Slow,
    Field(discriminator="op"),
]

_KINDS: dict[str, StepKind] = {"request": "request", "slow": "request", "retry": "retry",
                               "reuse": "reuse", "burst": "burst", "burst-again": "burst",
                               "keyless": "keyless", "fault": "fault", "heal": "heal",
                               "clock": "clock", "crash": "crash", "bad-body": "hostile",
                               "wait": "wait", "await-answers": "wait", "overlap": "overlap",
                               "handler-error": "handler-error", "after-write": "after-write"}


def kind_of(action: Action) -> StepKind:
    """The step kind a report shows for an action (a slow request is a request)."""
    return _KINDS[action.op]

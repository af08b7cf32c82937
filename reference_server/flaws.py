"""The named flaws: each one real mistake, selectable with ``--flaw NAME``.

A flaw is data: its name, the properties it breaks (ids from DESIGN.md), the one switch of
``Behaviour`` it flips, and a docstring saying the mistake, what breaks and how to see it.  The
flaw matrix and the training demo list them from ``FLAWS``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from reference_server._behaviour import Behaviour

__all__ = ["CANNOT_COMBINE", "FLAWS", "Flaw", "FlawClash", "UnknownFlaw", "combine", "flaws_named",
           "get_flaw", "with_flaws"]

#: What a flaw flips a switch of: the HTTP server's ``Behaviour`` or the consumer's.
B = TypeVar("B", bound=Any)


@dataclass(frozen=True, slots=True)
class Flaw(Generic[B]):
    name: str
    properties: tuple[str, ...]
    switch: Mapping[str, object]
    doc: str

    @property
    def summary(self) -> str:
        """The docstring's first line: the one-line story for reports."""
        return self.doc.strip().splitlines()[0]

    def apply(self, behaviour: B) -> B:
        return dataclasses.replace(behaviour, **self.switch)


class FlawClash(ValueError):
    """Flaws asked for together that cannot be: the message says which and why."""


class UnknownFlaw(KeyError):
    """No flaw has that name; the message lists the ones that exist."""

    def __init__(self, name: str, known: Iterable[str] | None = None, kind: str = "flaw") -> None:
        self.name = name
        names = ", ".join(FLAWS if known is None else known)
        super().__init__(f"unknown {kind} {name!r}; choose one of: {names}")

    def __str__(self) -> str:
        return str(self.args[0])


_ALL: tuple[Flaw[Behaviour], ...] = (
    Flaw("server-generated-key", ("P1", "P3"), {"client_key": False}, """
The server makes up a new key for every request instead of using the client's.

Mistake: the key is generated on the server, so a retry of the same operation arrives under a
fresh key and runs again; the seed's first "common mistake".
Breaks: P1 (a retry makes a second charge) and P3 (a retry is never a replay).
See it: POST one body twice under one Idempotency-Key: two charges, and the second response
has no Idempotent-Replayed header.
"""),
    Flaw("no-body-hash", ("P4",), {"hash_body": False}, """
The fingerprint leaves out the body, so a reused key replays another request's answer.

Mistake: the key is stored with a hash of method and path only; a buggy client that reuses a
key for a different charge gets the old charge back as if it were the new one.
Breaks: P4 (the same key with another body must get 422 and no side effect).
See it: POST {"amount": 100, ...} under K, then {"amount": 999, ...} under K: the second gets
the first charge, replayed, instead of 422 idempotency_key_reuse.
"""),
    Flaw("key-only", ("P3",), {"store_response": False}, """
Remembers that a key was processed, not what the answer was.

Mistake: only the key is stored, not the response; a retry learns "already done" but not the
status, the charge id or its Location.
Breaks: P3 (a retry must get the original status, body and headers).
See it: POST under K, retry: 200 {"status": "already_processed"} instead of the original 201
with the charge.
"""),
    Flaw("short-ttl", ("P6", "P1"), {"retention_cap": 300.0}, """
Forgets keys after 5 minutes, whatever --retention promises.

Mistake: a TTL shorter than the clients' retry horizon ("a client that retries after 6 hours
hits a fresh row and double-charges").
Breaks: P6 (retention shorter than declared) and then P1 (the late retry charges again).
See it: with --test-clock, POST under K, advance the clock 301 s, retry: a second charge, not
a replay, although --retention says 24 h.
"""),
    Flaw("no-cleanup", ("P11",), {"cleanup": False}, """
Never deletes expired keys.

Mistake: no background job (or one that never runs); the key table grows without bound, its
indexes slow down, and a late cleanup has to delete everything at once.
Breaks: P11 (expired keys are removed; storage stays bounded under steady load).
See it: advance the clock past --retention and POST /_admin/cleanup: it deletes nothing, and
/_admin/keys still counts every row.  Expired keys are still never replayed: only storage is
wrong.
"""),
    Flaw("check-then-insert", ("P1", "P5"), {"claim": "check-then-insert"}, """
Looks for the key, then inserts it: two concurrent requests both see nothing.

Mistake: SELECT, then INSERT, with a database round trip between them and no atomic claim (no
ON CONFLICT, no check that the insert took); every request that looked before the first insert
landed believes it owns the key.
Breaks: P1 and P5 (concurrent same-key requests each run the handler).
See it: release 8 requests with the same key and body at once: more than one charge.
"""),
    Flaw("insert-after-work", ("P1", "P5"), {"claim": "after-work"}, """
Records the key only after the work is done.

Mistake: the key is looked up before the work and written after it, so a retry that arrives
while the original is still running finds nothing and runs the work again.
Breaks: P1 and P5 (an in-flight retry must get 409, never a second execution).
See it: release 8 same-key requests at once against a handler that takes a while
(--work-delay-ms or X-Test-Delay-Ms): several charges and no 409.
"""),
    Flaw("stuck-after-crash", ("P9",), {"lease_recovery": False}, """
No lease: a key whose server died mid-request stays in progress forever.

Mistake: the in-progress row has no expiry, so when the process dies between the claim and the
commit nobody can ever finish or redo the operation.
Breaks: P9 (after a crash, retries converge to one effect and no key stays stuck past the
lease).
See it: POST with X-Test-Fault: crash-after-claim (--test-faults), restart the server, advance
the clock past --lease: the retry still gets 409, for good.
"""),
    Flaw("split-commit", ("P9", "P1"), {"single_commit": False}, """
Commits the charge and the stored response in two separate transactions.

Mistake: the work commits first and the response is stored afterwards; a crash between the two
leaves a charge whose key is still in progress, and once the lease runs out the retry charges
again.
Breaks: P9 and P1 (a crash must never leave a charge without its stored response).
See it: POST with X-Test-Fault: crash-after-work, restart, advance the clock past --lease,
retry: two charges for one key.
"""),
    Flaw("no-tenant-scope", ("P8",), {"tenant_scope": False}, """
Keys are global instead of belonging to a tenant.

Mistake: the key table's primary key is the key alone; two tenants that pick the same key
collide, and the second one is served the first one's stored response.
Breaks: P8 (the same key from two tenants is two operations; no tenant sees another's answer).
See it: POST under K as Bearer alice, then under K as Bearer bob: bob gets alice's charge,
replayed, and no charge of his own.
"""),
    Flaw("no-fencing", ("P1", "P2"), {"fencing": False}, """
The commit ignores the claim's fencing token: a lease without fencing.

Mistake: when a slow original outlives its lease, a retry takes the key over and charges; the
original then wakes up and commits its own charge and overwrites the stored response.
Breaks: P1 (two charges) and P2 (the 2xx answers name different charges).
See it: POST with X-Test-Delay-Ms longer than the test needs, advance the clock past --lease,
retry (it takes over and charges), then let the original finish: two charges.
"""),
    Flaw("ack-before-commit", ("P2",), {"commit_before_ack": False}, """
Sends the response before the transaction is durable.

Mistake: the 201 goes out first and the commit follows; if the process dies or the commit fails
in between, the client holds a charge id that does not exist, and its retry runs the work again
under another id.
Breaks: P2 (a key that got a 2xx has exactly one effect, and every 2xx names it).
See it: POST with X-Test-Fault: crash-after-work: the client gets 201, yet after a restart
GET /charges/{id} is 404; or cut the PostgreSQL proxy while the handler runs.
"""),
)

FLAWS: dict[str, Flaw[Behaviour]] = {flaw.name: flaw for flaw in _ALL}

#: The server's flaws that flip no common switch and still cannot be switched on together,
#: because one hides the other from any client: each pair with the reason.  (Two flaws that
#: flip one switch, check-then-insert and insert-after-work, contradict each other outright.)
_NEEDS_THE_CLIENTS_KEY = ("no-body-hash", "key-only", "short-ttl", "check-then-insert",
                          "insert-after-work", "stuck-after-crash", "split-commit",
                          "no-tenant-scope", "no-fencing")
CANNOT_COMBINE: dict[frozenset[str], str] = {
    **{frozenset({"server-generated-key", other}):
       f"server-generated-key makes up a fresh key for every request, so {other}, which needs "
       "the client's key seen twice, can never show" for other in _NEEDS_THE_CLIENTS_KEY},
    frozenset({"stuck-after-crash", "no-fencing"}):
        "stuck-after-crash never lets a retry take an expired lease over, so no-fencing (a "
        "late original committing after a takeover) can never show",
}


def get_flaw(name: str) -> Flaw[Behaviour]:
    try:
        return FLAWS[name]
    except KeyError:
        raise UnknownFlaw(name) from None


def flaws_named(names: Sequence[str]) -> list[Flaw[Behaviour]]:
    """The server's flaws by name, checked to combine (``UnknownFlaw``, ``FlawClash``)."""
    return combine([get_flaw(name) for name in names])


def combine(flaws: Sequence[Flaw[B]], *,
            cannot: Mapping[frozenset[str], str] = CANNOT_COMBINE) -> list[Flaw[B]]:
    """``flaws`` without repeats, or ``FlawClash`` when two of them contradict (they flip one
    switch differently) or one hides the other (``cannot``)."""
    chosen: list[Flaw[B]] = []
    for flaw in flaws:
        if flaw in chosen:
            continue
        for other in chosen:
            common = [switch for switch in flaw.switch if switch in other.switch
                      and flaw.switch[switch] != other.switch[switch]]
            if common:
                raise FlawClash(f"flaws {other.name} and {flaw.name} cannot be combined: both "
                                f"set {', '.join(common)}, each its own way; choose one")
            why = cannot.get(frozenset({flaw.name, other.name}))
            if why is not None:
                raise FlawClash(f"flaws {other.name} and {flaw.name} cannot be combined: {why}")
        chosen.append(flaw)
    return chosen


def with_flaws(behaviour: B, flaws: Sequence[Flaw[B]]) -> B:
    """``behaviour`` with every one of ``flaws`` switched on (``combine`` them first)."""
    for flaw in flaws:
        behaviour = flaw.apply(behaviour)
    return behaviour

"""The consumer's switches.  The correct consumer is ``ConsumerBehaviour()``; each flaw flips one.

As for the HTTP server (``reference_server._behaviour``), every deviation is a field here, so
the worker reads as the protocol and each flaw's whole effect is one ``replace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CORRECT", "AckPoint", "ConsumerBehaviour", "DedupStyle"]

AckPoint = Literal["after-commit", "before-work"]
DedupStyle = Literal["atomic", "none", "after-work", "check-then-insert", "memory"]


@dataclass(frozen=True, slots=True)
class ConsumerBehaviour:
    ack: AckPoint = "after-commit"
    """When the message is acked: after the work committed, or as soon as it arrives."""
    dedup: DedupStyle = "atomic"
    """How the dedup key is claimed: atomically with a lease, not at all, only after the work,
    looked up and then inserted without checking that the insert took, or in this process's
    memory only (forgotten by a restart, unknown to another member of the group)."""
    key_from_header: bool = True
    """The dedup key is the client's header when present (off: always the message id)."""
    retention_cap: float | None = None
    """Forget finished keys after this many seconds, whatever ``--retention`` says."""
    bounded_attempts: bool = True
    """A message that cannot be processed is dead-lettered (off: requeued for ever)."""
    auto_commit: bool = False
    """Kafka only: the client commits offsets on a timer (``enable.auto.commit``), whatever the
    work did; the consumer's own commit after the work is not made."""

    def retention(self, declared: float) -> float:
        """The dedup window the consumer really applies, in seconds."""
        return declared if self.retention_cap is None else min(declared, self.retention_cap)


CORRECT = ConsumerBehaviour()

"""The protocol's switches.  The correct server is ``Behaviour()``; each named flaw flips one.

Keeping every deviation as a field here (rather than ``if flaw == ...`` scattered through the
layer) means the layer reads as the protocol, and each flaw's whole effect is one ``replace``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["CORRECT", "Behaviour", "ClaimStyle"]

ClaimStyle = Literal["atomic", "check-then-insert", "after-work"]


@dataclass(frozen=True, slots=True)
class Behaviour:
    client_key: bool = True
    """Use the client's key (off: the server makes one up for every request)."""
    hash_body: bool = True
    """The fingerprint covers the body, not only method and path."""
    store_response: bool = True
    """Store the response itself, not only the fact that the key was processed."""
    retention_cap: float | None = None
    """Forget keys after this many seconds, whatever ``--retention`` says."""
    cleanup: bool = True
    """The cleanup job deletes expired keys."""
    claim: ClaimStyle = "atomic"
    """How a key is claimed: one atomic step, or one of the two racy ways."""
    lease_recovery: bool = True
    """A key whose lease ran out can be claimed again."""
    single_commit: bool = True
    """The work and the stored response commit in one transaction."""
    tenant_scope: bool = True
    """Keys belong to a tenant."""
    fencing: bool = True
    """The commit holds only while the key still carries the claim's token."""
    commit_before_ack: bool = True
    """The response is sent only after the commit."""

    def retention(self, declared: float) -> float:
        """The retention the server really applies, in seconds."""
        return declared if self.retention_cap is None else min(declared, self.retention_cap)


CORRECT = Behaviour()

"""Each property in the words a person uses: what went wrong, and why it matters.

The checker's messages say exactly what happened to which key; these say what that means for a
customer, so a report and the training demo can explain a finding to someone who has never read
the protocol.  Keyed by the stable property ids of ../shared/DESIGN.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness._findings import Klass

__all__ = ["KLASS_MEANING", "PLAIN", "Explanation", "explain"]


@dataclass(frozen=True, slots=True)
class Explanation:
    headline: str
    meaning: str


PLAIN: dict[str, Explanation] = {
    "P1": Explanation(
        "The card was charged more than once",
        "One operation (one idempotency key) caused more than one side effect. A retry reached "
        "the server and was executed again instead of being answered from the stored response: "
        "the customer pays twice."),
    "P2": Explanation(
        "The client was told one thing, the ledger holds another",
        "A key that got a success must have exactly one charge, and every success must name it. "
        "Here the answers and the ledger disagree, so the client cannot tell which charge is "
        "real, or holds a charge that does not exist."),
    "P3": Explanation(
        "The retry did not get the original answer",
        "A retry with the same key and the same request must receive what the first attempt "
        "received: status, body and meaningful headers. Otherwise the client acts on an answer "
        "other than the one the server committed to."),
    "P4": Explanation(
        "A reused key was not refused",
        "The same key with a different request (another body, path or method) must be refused "
        "with 422 and change nothing, while the same JSON in another key order is the same "
        "request. Otherwise a buggy client is told its second request happened when it did not."),
    "P5": Explanation(
        "A retry during the original was not told to wait",
        "While the first attempt is still running, a retry must get 409 'in progress' (or wait "
        "for the replay, when the server promises to). Anything else risks a second execution."),
    "P6": Explanation(
        "The server forgot the key too early",
        "Keys must be remembered for the promised retention window, and that window must cover "
        "how late clients retry. A retry the server has forgotten is a brand-new charge."),
    "P7": Explanation(
        "A request without a key was handled wrongly",
        "In strict mode a missing Idempotency-Key must be refused with 400, so the mistake shows "
        "in development; in lax mode the request is processed like any unprotected one."),
    "P8": Explanation(
        "One tenant was mixed up with another",
        "Keys belong to a tenant. Two customers who happen to choose the same key are two "
        "operations; nobody may receive another customer's stored response, or be refused "
        "because of it."),
    "P9": Explanation(
        "A crash left the key broken",
        "After the server dies mid-request, retries must converge to exactly one charge, and "
        "the key must not stay 'in progress' past the lease."),
    "P10": Explanation(
        "Bad input was not refused safely",
        "Malformed, oversized or hostile keys and bodies must get a 4xx, charge nothing, and "
        "leave the server serving."),
    "P11": Explanation(
        "Expired keys are never removed",
        "Keys older than the retention window must be deleted, or the key table grows without "
        "bound: indexes slow down and the cleanup that finally runs locks the table."),
}

KLASS_MEANING: dict[Klass, str] = {
    "safety": "safety: costs money or leaks data",
    "conformance": "conformance: deviates from the target's promise or the IETF draft",
}


def explain(property_id: str) -> Explanation:
    """The plain words for ``property_id``; an id this module does not know is said as is."""
    return PLAIN.get(property_id, Explanation(f"Property {property_id} did not hold", ""))

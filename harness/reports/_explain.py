"""Each property in the words a person uses: what went wrong, and why it matters.

The checker's messages say exactly what happened to which key; these say what that means for a
customer, so a report and the training demo can explain a finding to someone who has never read
the protocol.  Keyed by the stable property ids of ../shared/DESIGN.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness._history import NEMESIS, Event
from harness.judging._findings import Klass

__all__ = ["KLASS_MEANING", "PLAIN", "Explanation", "explain", "incident_of"]


@dataclass(frozen=True, slots=True)
class Explanation:
    headline: str
    meaning: str


PLAIN: dict[str, Explanation] = {
    "P1": Explanation(
        "The card was charged more than once",
        "One operation (one idempotency key) caused more than one side effect: the customer "
        "pays twice. The finding says how, from its own evidence: copies that ran at the same "
        "time (the key was not claimed atomically), a retry that ran again instead of being "
        "answered from the stored response, or a request run again after the server died in "
        "it. Keys that differ only in letter case, or after a long shared prefix, are different "
        "operations and may each charge once."),
    "P2": Explanation(
        "The client was told one thing, the ledger holds another",
        "A key answered with a success must have its charge, and every success must name the "
        "same one; a key answered with an error must have charged nothing. Here the answers and "
        "the ledger disagree, so the client cannot tell which charge is real, holds one that "
        "does not exist, or stops retrying a charge that was made. (More than one charge is "
        "P1.)"),
    "P3": Explanation(
        "The retry did not get the original answer",
        "A retry with the same key and the same request must receive what the first attempt "
        "received: status, body and meaningful headers, marked with the replay header the "
        "target promises (with its promised value). Only a stored answer is replayed: a "
        "refusal, or a validation error the target does not store, answered twice is two fresh "
        "answers. Otherwise the client acts on an answer other than the one the server "
        "committed to."),
    "P4": Explanation(
        "A reused key was not refused",
        "The same key with a different request (another body, another declared operation that "
        "shares its keys, another query string when the target says the query counts) must be "
        "refused with the status the target promises (the draft says 422) and change nothing, "
        "while the same JSON in another key order is the same request. Only declared operations "
        "are probed. Otherwise a buggy client is told its second request happened when it did "
        "not."),
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
        "in development; in lax mode the request is processed like any unprotected one. What "
        "such a request charged is counted the way the target file says (a keyless count, or "
        "the difference of the total around one request sent alone), or not at all, and then "
        "only the answers are judged."),
    "P8": Explanation(
        "One tenant was mixed up with another",
        "Keys belong to a tenant. Two customers who happen to choose the same key are two "
        "operations; nobody may receive another customer's stored response, or be refused "
        "because of it."),
    "P9": Explanation(
        "A crash left the key broken",
        "After the server dies mid-request, or loses its store, retries must converge to exactly "
        "one charge, and the key must not stay 'in progress' past the promised lease. Before "
        "the lease has run out a key in progress is not stuck: the verdict is unknown until "
        "the harness has waited for it."),
    "P10": Explanation(
        "Bad input was not refused safely",
        "Malformed, oversized or hostile keys and bodies must get a 4xx (for a key that breaks "
        "the declared rules, the promised status), charge nothing, and leave the server "
        "serving; a service that exits by itself is a finding of its own. A key the declared "
        "rules accept, however odd, is an ordinary key."),
    "P11": Explanation(
        "Expired keys are never removed",
        "Keys older than the retention window must be deleted, or the key table grows without "
        "bound: indexes slow down and the cleanup that finally runs locks the table."),
}

KLASS_MEANING: dict[Klass, str] = {
    "safety": "safety: costs money or leaks data",
    "conformance": "conformance: deviates from the target's promise or the IETF draft",
}


#: What a nemesis event a P9 finding cites did, as the start of its headline.
#: (A front end's own faults are its ``Front.incidents``.)
_INCIDENTS = {"crash": "A crash", "exit": "A crash"}


def incident_of(cited: Iterable[Event], faults: Mapping[str, str] | None = None) -> str | None:
    """What broke in a P9 finding's own evidence (its first crash or fault), in a headline's
    words (``faults``: its front end's words for its faults); None when it cites none."""
    for event in cited:
        if event.process != NEMESIS or event.f not in ("crash", "exit", "fault"):
            continue
        if event.f != "fault":
            return _INCIDENTS[event.f]
        if event.value.get("where") == "store":
            return "A store outage"
        words: Mapping[str, str] = faults if faults is not None else {}
        return words.get(str(event.value.get("fault")), "A network fault")
    return None


def explain(property_id: str, *, incident: str | None = None,
            own: Explanation | None = None) -> Explanation:
    """The plain words for ``property_id``, or the front end's ``own`` where they differ (a
    queue consumer's P9 speaks of redeliveries); an id this module does not know is said as
    is.  A P9 finding's headline names its ``incident`` (``incident_of``)."""
    plain = own or PLAIN.get(property_id, Explanation(f"Property {property_id} did not hold", ""))
    if property_id != "P9":
        return plain
    headline = f"{incident} left the key broken" if incident else plain.headline
    return Explanation(headline, plain.meaning)

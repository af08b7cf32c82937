"""The queue account: what became of every job, counted as Jepsen's total-queue checker counts.

Per key and per scenario: messages published, confirmed by the broker, delivered and
redelivered (as the consumer's events feed reports them), acked, found in the dead-letter queue,
and the effects the oracle counted.  Then each key's outcome:

- ``ok``: the job ran as often as it may (once per dedup window; never for a poison message);
- ``lost``: a confirmed job with no effect once the queue drained;
- ``duplicated``: more effects than the dedup windows allow;
- ``recovered``: a job whose publish was never confirmed (it may not have been queued) that
  ran all the same (Jepsen's "recovered");
- ``unexpected``: an effect where none may be (a poison message, a job the harness made fail
  on every delivery, a publish the broker refused);
- ``unsettled``: no effect, but the message was still in the queue or the queue never drained;
- ``unknown``: the effects could not be counted.

The checker keeps the account beside its verdicts (``CheckResult.summary``); reports print it.
It judges nothing: the properties do (P1 for duplicates, P2 for lost jobs, P10 for the rest).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from harness.consumer._analysis import Publish, QueueView
from harness.consumer._target import ConsumerPromises
from harness.judging._analysis import View
from harness.judging._checker import CheckOptions

__all__ = ["COUNTS", "OUTCOMES", "add_accounts", "queue_account", "windows"]

COUNTS = ("keys", "published", "confirmed", "delivered", "redelivered", "acked",
          "dead_lettered", "effects")
OUTCOMES = ("ok", "lost", "duplicated", "recovered", "unexpected", "unsettled", "unknown")


def windows(view: View, publishes: list[Publish], window: float | None) -> int:
    """How many dedup windows a key's publishes span: each may run the job once."""
    count, opened = 0, None
    for publish in publishes:
        at = view.target_time(publish.invoke)
        if opened is None or (window is not None and at - opened > window):
            count, opened = count + 1, at
    return max(count, 1)


def _outcome(queue: QueueView, key: str, publishes: list[Publish], effects: int | None,
             window: float | None) -> str:
    if effects is None:
        return "unknown"
    if any(p.poison for p in publishes):
        return "unexpected" if effects else "ok"
    if not any(p.confirmed for p in publishes):
        if effects and not any(p.maybe_queued for p in publishes):
            return "unexpected"  # every publish was refused, yet the job ran
        return "recovered" if effects else "ok"
    if effects > windows(queue.view, publishes, window):
        return "duplicated"
    if effects:
        return "ok"
    if queue.events_of("leftover", key) or queue.drained is None:
        return "unsettled"
    return "lost"


def queue_account(view: View, options: CheckOptions) -> dict[str, Any]:
    """The account of one consumer history, as JSON-ready data: totals, outcome counts and
    fractions of keys, and the same figures per key."""
    queue = QueueView(view)
    promises = options.promises
    window = promises.dedup_window if isinstance(promises, ConsumerPromises) else None
    per_key: dict[str, dict[str, Any]] = {}
    for key, publishes in queue.publishes.items():
        seen = view.effects.get((None, key))
        effects = seen.count if seen is not None else None
        delivered = queue.events_of("deliver", key)
        per_key[key] = {
            "published": len(publishes),
            "confirmed": sum(1 for p in publishes if p.confirmed),
            "delivered": len(delivered) if queue.reports_deliveries else None,
            "redelivered": (sum(1 for d in delivered if d.value.get("redelivered"))
                            if queue.reports_deliveries else None),
            "acked": len(queue.events_of("ack", key)) if queue.reports_deliveries else None,
            "dead_lettered": len(queue.events_of("dead-lettered", key)),
            "effects": effects,
            "outcome": _outcome(queue, key, publishes, effects, window),
        }
    return _totals(per_key.values(), feed=queue.reports_deliveries) | {"per_key": per_key}


def _totals(rows: Iterable[Mapping[str, Any]], *, feed: bool) -> dict[str, Any]:
    rows = list(rows)
    totals: dict[str, Any] = {"keys": len(rows)}
    for name in COUNTS[1:]:
        values = [r.get(name) for r in rows]
        known = [int(v) for v in values if v is not None]
        totals[name] = sum(known) if known or not rows else None
    if not feed:
        for name in ("delivered", "redelivered", "acked"):
            totals[name] = None
    outcomes = Counter(str(r.get("outcome")) for r in rows)
    totals["outcomes"] = {o: outcomes[o] for o in OUTCOMES}
    totals["fractions"] = {o: round(outcomes[o] / len(rows), 4) if rows else 0.0
                           for o in OUTCOMES}
    totals["feed"] = feed
    return totals


def add_accounts(accounts: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """One account for a whole run: the scenarios' accounts added up (None without any)."""
    accounts = [a for a in accounts if a]
    if not accounts:
        return None
    rows = [row for account in accounts for row in account.get("per_key", {}).values()]
    return _totals(rows, feed=any(a.get("feed") for a in accounts))

"""The load figures, read off the merged history and the checker's result: nothing here judges.

Latencies are the time between an attempt's invoke and its completion in the history, so a
distributed run is measured exactly like a local one; first attempts and retries are kept apart,
because retries are where a target under chaos spends its time.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from harness._target import Promises
from harness.http.load._charges import DOUBLE_SUBMIT, REUSE
from harness.judging._analysis import Attempt, View, is_final
from harness.judging._checker import CheckResult

__all__ = ["fault_windows", "load_figures", "percentiles", "timeline"]

PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))


def percentiles(values: Sequence[float]) -> dict[str, float | None]:
    """Nearest-rank p50, p95 and p99 of ``values`` (None when there are none)."""
    ordered = sorted(values)
    if not ordered:
        return {name: None for name, _ in PERCENTILES}
    return {name: round(ordered[max(1, math.ceil(fraction * len(ordered))) - 1], 3)
            for name, fraction in PERCENTILES}


def _latency_ms(attempt: Attempt) -> float:
    assert attempt.completion is not None
    return (attempt.completion.time - attempt.invoke.time) * 1000.0


def _span(attempts: Sequence[Attempt]) -> float:
    if not attempts:
        return 0.0
    first = min(a.invoke.time for a in attempts)
    last = max(a.completion.time if a.completion else a.invoke.time for a in attempts)
    return max(last - first, 1e-9)


def load_figures(view: View, promises: Promises, check: CheckResult) -> dict[str, Any]:
    """Every figure of a load run; see docs/load.md for what each one means."""
    attempts = [a for a in view.attempts if a.invoke.key is not None]
    done = [a for a in attempts if a.completion is not None]
    seconds = _span(attempts)
    keys = view.keyed()
    give_ups = sum(
        1 for _, key_attempts in keys
        if not any(a.completion is not None and is_final(a.completion, promises)
                   for a in key_attempts)
    )
    marker = promises.replay_header
    counts = [seen.count for seen in view.effects.values() if seen.count is not None]
    duplicate_keys = sorted({f.key or "" for f in check.findings if f.property == "P1"})
    lost_keys = sorted({f.key or "" for f in check.findings if f.property == "P2"})
    statuses = Counter(str(a.status) for a in done if a.status is not None)
    no_answer = Counter(a.completion.error or "unknown" for a in done
                        if a.completion is not None and a.status is None)
    first = [_latency_ms(a) for a in done if a.invoke.attempt == 1]
    retries = [a for a in attempts if (a.invoke.attempt or 1) > 1 and a.invoke.label != REUSE]
    retry = [_latency_ms(a) for a in retries if a.completion is not None]
    reuses = [a for a in attempts if a.invoke.label == REUSE]
    per_key = Counter(a.identity for a in retries)
    return {
        "seconds": round(seconds, 3),
        "requests": len(attempts),
        "requests_per_s": round(len(attempts) / seconds, 2) if attempts else 0.0,
        "keys": len(keys),
        "charges_per_s": round(len(keys) / seconds, 2) if keys else 0.0,
        "latency_ms": {
            "first": {**percentiles(first), "count": len(first)},
            "retry": {**percentiles(retry), "count": len(retry)},
        },
        "retries": len(retries),
        "retries_per_key": {"mean": round(len(retries) / len(keys), 3) if keys else 0.0,
                            "max": max(per_key.values(), default=0)},
        "double_submits": len({a.identity for a in attempts if a.invoke.label == DOUBLE_SUBMIT}),
        "reuses": len({a.identity for a in reuses}),
        "reuses_refused": sum(1 for a in reuses if a.status == promises.mismatch_status),
        "status_409": sum(1 for a in done if promises.says_in_progress(a.status)),
        "replays": (sum(1 for a in done if promises.marks_replay(a.headers))
                    if marker else None),
        "give_ups": give_ups,
        "duplicates": len(duplicate_keys),
        "extra_charges": sum(count - 1 for count in counts if count > 1),
        "lost_outcomes": len(lost_keys),
        "unknown_effects": sum(1 for seen in view.effects.values() if seen.count is None),
        "statuses": dict(sorted(statuses.items())),
        "no_answer": dict(sorted(no_answer.items())),
        "faults": len(view.fault_windows),
        "crashes": len(view.crashes),
        "duplicate_keys": duplicate_keys,
        "lost_outcome_keys": lost_keys,
    }


def timeline(view: View) -> list[dict[str, Any]]:
    """Per second of the run: attempts completed and their latency percentiles."""
    buckets: dict[int, list[float]] = defaultdict(list)
    for attempt in view.attempts:
        if attempt.completion is not None and attempt.invoke.key is not None:
            second = max(0, int(attempt.completion.time))
            buckets[second].append(_latency_ms(attempt))
    last = max(buckets, default=-1)
    rows = []
    for second in range(last + 1):
        latencies = buckets.get(second, [])
        shares = percentiles(latencies)
        rows.append({"t": second, "requests_per_s": float(len(latencies)),
                     **{f"{name}_ms": shares[name] for name, _ in PERCENTILES}})
    return rows


def fault_windows(view: View) -> list[dict[str, Any]]:
    """Each fault from its injection to its heal (paired as the checker pairs them), and each
    crash from the kill to the restart, in the order they began.

    A window still open at the end of the history closes at the history's last event.
    """
    end = view.events[-1].time if view.events else 0.0
    windows: list[tuple[int, dict[str, Any]]] = [
        (fault.index, {"start": fault.time, "end": heal.time if heal else end,
                       "fault": str(fault.value.get("fault"))})
        for fault, heal in view.fault_windows
    ]
    open_crashes: dict[int, dict[str, Any]] = {}
    for event in view.nemesis:
        instance = int(event.value.get("instance", 0))
        if event.f == "crash":
            open_crashes[instance] = {"start": event.time, "end": end, "fault": "crash",
                                      "instance": instance}
            windows.append((event.index, open_crashes[instance]))
        elif event.f == "restart" and instance in open_crashes:
            open_crashes.pop(instance)["end"] = event.time
    windows.sort(key=lambda item: item[0])
    return [{**w, "start": round(w["start"], 3), "end": round(w["end"], 3)} for _, w in windows]

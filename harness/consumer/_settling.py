"""When a queue has settled, read from what the consumers' events feeds reported.

Read in the history, so the drain and its tests see the same rule.

A key has settled when each of its messages reached a final state and nothing is still working
on it: every first delivery (and every confirmed publish) is matched by a final ack or
dead-lettering, and no live consumer process holds a delivery of the key that it has not
settled.  An ack sent while the nemesis held the consumer's acks back (``ack-held``) never
reached the broker, so it is not final: the message comes back, and the key waits for the
redelivery's outcome.  A nack with requeue, a lost ack or a process that died holding a
delivery is not final either.  Deliveries of a process that died count for nothing once the
process is gone: its messages are back in the queue.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence

from harness._history import Event

__all__ = ["FINAL", "SETTLES_DELIVERY", "still_held", "unsettled"]

#: The kinds after which a delivery is settled in the process that reported it.
SETTLES_DELIVERY = frozenset({"ack", "ack-lost", "nack", "dead-letter"})
#: The kinds that end a message for good: the broker will not deliver it again.
FINAL = frozenset({"ack", "dead-letter"})


def _held_windows(events: Sequence[Event]) -> dict[str, list[tuple[float, float]]]:
    """Per consumer process name, the spans during which its acks were held back."""
    windows: dict[str, list[tuple[float, float]]] = defaultdict(list)
    opened: dict[str, float] = {}
    for event in events:
        if event.value.get("fault") != "ack-held" or event.value.get("where") != "consumer":
            continue
        process = f"consumer-{event.value.get('instance', 0)}"
        if event.f == "fault":
            opened[process] = event.time
        elif event.f == "heal" and process in opened:
            windows[process].append((opened.pop(process), event.time))
    for process, start in opened.items():
        windows[process].append((start, float("inf")))
    return windows


def _working(holding: Counter[tuple[str, int | None]],
             alive: set[tuple[str, int | None]]) -> list[str]:
    """The live processes among ``holding`` that hold a delivery they have not settled."""
    alive_names = {name for name, _ in alive}
    return [f"{p} (pid {pid})" for (p, pid), n in holding.items()
            if n > 0 and ((p, pid) in alive or (pid is None and p in alive_names))]


def still_held(events: Sequence[Event], keys: Iterable[str],
               live: Iterable[tuple[str, int | None]]) -> dict[str, str]:
    """The keys among ``keys`` that a live consumer process holds a delivery of and has not
    settled yet, each with who holds it (a broker that settles messages by itself, such as a
    Kafka group's committed offsets, still asks this of the feed)."""
    wanted, alive = set(keys), set(live)
    holding: dict[str, Counter[tuple[str, int | None]]] = defaultdict(Counter)
    for event in events:
        if event.key is None or event.key not in wanted:
            continue
        holder = (event.process, event.value.get("pid"))
        if event.f == "deliver":
            holding[event.key][holder] += 1
        elif event.f in SETTLES_DELIVERY:
            holding[event.key][holder] -= 1
    why: dict[str, str] = {}
    for key, held in holding.items():
        working = _working(held, alive)
        if working:
            why[key] = f"still held by {', '.join(working)}"
    return why


def unsettled(events: Sequence[Event], confirmed: Mapping[str, int],
              live: Iterable[tuple[str, int | None]]) -> dict[str, str]:
    """The keys of ``confirmed`` (key -> confirmed publishes) that have not settled, each with
    why; ``live`` names the consumer processes running now, as (process name, pid)."""
    alive = set(live)
    held = _held_windows(events)
    firsts: Counter[str] = Counter()
    finals: Counter[str] = Counter()
    holding: dict[str, Counter[tuple[str, int | None]]] = defaultdict(Counter)
    for event in events:
        key = event.key
        if key is None or key not in confirmed:
            continue
        holder = (event.process, event.value.get("pid"))
        if event.f == "deliver":
            holding[key][holder] += 1
            if not event.value.get("redelivered"):
                firsts[key] += 1
        elif event.f in SETTLES_DELIVERY:
            holding[key][holder] -= 1
            lost = event.f == "ack" and any(start <= event.time <= end
                                            for start, end in held.get(event.process, ()))
            if event.f in FINAL and not lost:
                finals[key] += 1
    why: dict[str, str] = {}
    for key, published in confirmed.items():
        messages = max(published, firsts[key])
        working = _working(holding[key], alive)
        if working:
            why[key] = f"still held by {', '.join(working)}"
        elif finals[key] < messages:
            why[key] = (f"{finals[key]} of its {messages} message(s) acked or dead-lettered "
                        "for good")
    return why

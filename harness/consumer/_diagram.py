"""A queue consumer's sequence diagram: a finding's events, with the broker as a lane of its own.

Lanes: the producer, the broker, Toxiproxy (the consumer's connection), the consumer and its
store.  A publish goes producer to broker and its confirm comes back (or is lost); a delivery
crosses Toxiproxy to the consumer; commits go to the store; acks go back to the broker (or
stop at Toxiproxy when they are lost).  Faults, kills and clock moves are boxes on the lane they
act on; the drain and the dead-letter queue are boxes on the broker.  Highlights follow the
finding: every commit of its key after the first, for a duplicate; nothing is judged here.
The same ``Diagram`` as an HTTP finding's (``harness/diagrams/_model.py``), so the same
template draws it.
"""

from __future__ import annotations

from harness._durations import format_duration
from harness._history import Event
from harness.diagrams._model import (
    BOTTOM,
    CHAR,
    DUPLICATES,
    ROW,
    TOP,
    WIDTH,
    Band,
    Box,
    Diagram,
    Label,
    Lane,
    LaneName,
    Line,
    Row,
    tooltip,
)
from harness.judging._findings import Finding

__all__ = ["CONSUMER_LANES", "consumer_diagram"]

CONSUMER_LANES: dict[LaneName, tuple[str, float]] = {
    "producer": ("producer", 110.0), "broker": ("RabbitMQ", 320.0),
    "toxiproxy": ("Toxiproxy", 520.0), "consumer": ("consumer", 700.0),
    "store": ("store", 870.0),
}


def _x(lane: LaneName) -> float:
    return CONSUMER_LANES[lane][1]


def _box(lane: LaneName, text: str, *, bolt: bool = False) -> Box:
    width = len(text) * CHAR + (34 if bolt else 20)
    x = min(max(_x(lane) - width / 2, 4.0), WIDTH - width - 4)
    return Box(x, width, text, bolt)


def _fit(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def consumer_diagram(chosen: list[Event], finding: Finding | None) -> Diagram:
    """The diagram of the ``chosen`` events (at least one, in history order); what ``finding``
    is about is highlighted, and without a finding nothing is."""
    start = chosen[0].time
    rows: list[Row] = []
    commits_seen: dict[str | None, int] = {}
    held: set[str] = set()  # consumers whose acks Toxiproxy holds back
    duplicate = finding is not None and finding.property in DUPLICATES

    def add(event: Event, kind: str, *, highlight: bool = False,
            lines: tuple[Line, ...] = (), crosses: tuple[float, ...] = (),
            labels: tuple[Label, ...] = (), boxes: tuple[Box, ...] = ()) -> None:
        elapsed = event.time - start
        shown = f"+{elapsed:.2f}s" if elapsed < 100 else f"+{format_duration(elapsed)}"
        rows.append(Row(kind, TOP + ROW * len(rows), shown, tooltip(event), event.index,
                        highlight, lines, crosses, labels, boxes))

    for event in chosen:
        who = f"{event.process} · " if event.process.startswith("consumer-") else ""
        if event.f == "publish" and event.type == "invoke":
            text = f"publish {event.label or ''} {event.key or ''}".replace("  ", " ")
            add(event, "request", lines=(Line(_x("producer"), _x("broker")),),
                labels=(Label(_x("producer") + 8, _fit(text)),))
        elif event.f == "publish":
            lost = event.type != "ok"
            text = "confirm" if not lost else f"no confirm ({event.error or 'lost'})"
            add(event, "answer", lines=(Line(_x("broker"), _x("producer"), dashed=True,
                                             arrow=not lost),),
                crosses=(_x("producer") + 40,) if lost else (),
                labels=(Label(_x("producer") + 8, _fit(text)),))
        elif event.f == "deliver":
            again = " (redelivered)" if event.value.get("redelivered") else ""
            add(event, "request", lines=(Line(_x("broker"), _x("consumer")),),
                labels=(Label(_x("broker") + 8, _fit(f"{who}deliver{again}", 44)),))
        elif event.f == "commit":
            seen = commits_seen.get(event.key, 0)
            commits_seen[event.key] = seen + 1
            highlight = duplicate and seen >= 1 and (finding is None or finding.key == event.key)
            add(event, "commit", highlight=highlight,
                lines=(Line(_x("consumer"), _x("store")),),
                labels=(Label(_x("consumer") + 8, _fit(
                    f"commit {event.value.get('charge', '')}", 22)),))
        elif event.f == "ack" and event.process in held:
            add(event, "answer", lines=(Line(_x("consumer"), _x("toxiproxy"), dashed=True,
                                             arrow=False),),
                crosses=(_x("toxiproxy"),),
                labels=(Label(_x("toxiproxy") + 8, _fit(f"{who}ack, held", 30)),))
        elif event.f in ("ack", "nack", "dead-letter"):
            text = {"ack": f"ack ({event.value.get('outcome', '')})".replace(" ()", ""),
                    "nack": "nack, requeue", "dead-letter": "dead-letter"}[event.f]
            add(event, "answer", lines=(Line(_x("consumer"), _x("broker"), dashed=True),),
                labels=(Label(_x("broker") + 8, _fit(f"{who}{text}", 44)),))
        elif event.f == "ack-lost":
            add(event, "answer", lines=(Line(_x("consumer"), _x("toxiproxy"), dashed=True,
                                             arrow=False),),
                crosses=(_x("toxiproxy"),),
                labels=(Label(_x("toxiproxy") + 8, _fit(f"{who}ack lost", 30)),))
        elif event.f in ("claim", "wait", "pause", "poison", "work-failed"):
            add(event, event.f, boxes=(_box("consumer", f"{event.f}"),))
        elif event.f in ("fault", "heal"):
            if event.value.get("fault") == "ack-held":
                consumer = f"consumer-{event.value.get('instance', 0)}"
                (held.add if event.f == "fault" else held.discard)(consumer)
            lane: LaneName = ("producer" if event.value.get("where") == "producer"
                              else "toxiproxy")
            name = str(event.value.get("fault"))
            add(event, event.f, boxes=(_box(lane, name if event.f == "fault" else
                                            f"healed {name}", bolt=event.f == "fault"),))
        elif event.f in ("crash", "restart", "exit"):
            text = {"crash": f"killed ({event.value.get('how', '?')})", "restart": "restart",
                    "exit": f"exited ({event.value.get('code')})"}[event.f]
            add(event, event.f, boxes=(_box("consumer", text, bolt=event.f == "crash"),))
        elif event.f == "clock":
            add(event, "clock", boxes=(_box(
                "consumer", f"clock +{format_duration(float(event.value.get('seconds', 0)))}"),))
        elif event.f == "effects":
            count = event.value.get("count", "?") if event.type == "ok" else "?"
            add(event, "ledger", highlight=duplicate,
                boxes=(_box("store", f"ledger: {count} charge(s)"),))
        elif event.f == "store-size":
            add(event, "size", boxes=(_box("store", f"dedup table: "
                                                    f"{event.value.get('rows', '?')} rows"),))
        elif event.f == "drain":
            add(event, "drain", boxes=(_box("broker", f"drained, {event.value.get('left', 0)} "
                                                      "left"),))
        elif event.f in ("leftover", "dead-lettered"):
            text = "left in the queue" if event.f == "leftover" else "in the dead-letter queue"
            add(event, event.f, highlight=finding is not None and finding.property == "P10",
                boxes=(_box("broker", text),))
    height = TOP + ROW * len(rows) + BOTTOM
    return Diagram(
        title=f"{finding.property} {finding.key or ''}".strip() if finding else "",
        width=WIDTH, height=height,
        lanes=tuple(Lane(name, title, x) for name, (title, x) in CONSUMER_LANES.items()),
        rows=tuple(rows), bands=tuple(_bands(chosen, rows, height)),
        faults=tuple(dict.fromkeys(str(e.value.get("fault")) for e in chosen
                                   if e.f == "fault")))


def _bands(chosen: list[Event], rows: list[Row], height: float) -> list[Band]:
    tops = {row.index: row.top for row in rows if row.index is not None}
    bottom = height - BOTTOM
    bands: list[Band] = []
    open_faults: dict[str, tuple[Event, float]] = {}
    down: float | None = None
    for event in chosen:
        top = tops.get(event.index, bottom) + ROW / 2
        name = str(event.value.get("fault"))
        lane: LaneName = "producer" if event.value.get("where") == "producer" else "toxiproxy"
        if event.f == "fault":
            open_faults[name] = (event, top)
        elif event.f == "heal" and name in open_faults:
            _, begin = open_faults.pop(name)
            bands.append(Band("fault", _x(lane), begin, top, f"{name} acting"))
        elif event.f == "crash":
            down = top
        elif event.f == "restart" and down is not None:
            bands.append(Band("down", _x("consumer"), down, top, "consumer down"))
            down = None
    for name, (event, begin) in open_faults.items():
        where: LaneName = "producer" if event.value.get("where") == "producer" else "toxiproxy"
        bands.append(Band("fault", _x(where), begin, bottom, f"{name} acting"))
    if down is not None:
        bands.append(Band("down", _x("consumer"), down, bottom, "consumer down"))
    return bands

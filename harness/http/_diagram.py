"""An HTTP target's sequence diagram: a finding's smallest event sequence, laid out.

Lanes: the client, Toxiproxy, the server and its store.  Every event the finding cites is a row:
a request crosses Toxiproxy to the server (or stops there while an upstream fault holds it), its
answer comes back (or is lost at Toxiproxy while a response fault acts), a write the store proxy
saw committed goes from the server to the store, faults, crashes and clock jumps are markers on
the lane they act on, and the oracle's count is a ledger box on the store.
A request stall (an upstream latency longer than the stall) holds requests at Toxiproxy; they
reach the server together when it is healed, which is where their charges are drawn.

Commits are not events, so they are read off the history: a success naming a charge nobody named
before committed it; a charge that the ledger holds and no answer named was committed by the one
attempt whose answer was lost, drawn dashed because it is inferred.  Which rows are highlighted
follows from the finding the checker made (the duplicate commits of a P1, the answer a P3 is
about), never from a judgement of this module's own.  It lays out a ``Diagram``
(``_model.py``); ``sequence.svg.j2`` draws it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus

from harness._durations import format_duration
from harness._history import Event
from harness._target import ReplayMarker
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
    fit,
    tooltip,
)
from harness.judging._analysis import Attempt, Identity, View, describe_identity
from harness.judging._findings import Finding

__all__ = ["BLOCKING", "HttpBoard"]

LANE_X: dict[LaneName, float] = {"client": 150.0, "toxiproxy": 380.0, "server": 600.0,
                                 "store": 830.0}
LANE_TITLES: dict[LaneName, str] = {"client": "client", "toxiproxy": "Toxiproxy",
                                    "server": "server", "store": "store"}
#: Toxics that keep a request from the server, or an answer from the client; the training
#: demo's narrator tells a downstream one as a lost response.
BLOCKING = frozenset({"timeout", "reset_peer", "limit_data"})
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")


@dataclass(frozen=True, slots=True)
class _Commit:
    attempt: Attempt
    resource: str | None
    inferred: bool
    ordinal: int = 0


@dataclass(frozen=True, slots=True)
class _Context:
    """What the rows need to know about the whole scenario, not only the cited events."""

    view: View
    replay_marker: ReplayMarker | None
    blocked: frozenset[int]  # invoke indices stopped at Toxiproxy, never delivered
    lost: frozenset[int]  # completion indices lost at Toxiproxy
    held: dict[int, int]  # invoke indices held at Toxiproxy -> the heal that released them
    by_invoke: dict[int, Attempt]
    by_completion: dict[int, Attempt]


#: Commits by the committing attempt's invoke index: one diagram's, for its cited identities.
_Commits = dict[int, _Commit]


class HttpBoard:
    """One HTTP scenario's history, read once for every diagram drawn from it.

    A scenario of a load run can have a hundred findings drawn; each would otherwise pair the
    attempts and trace the faults of the whole history again.
    """

    def __init__(self, events: Sequence[Event], *,
                 replay_marker: ReplayMarker | None = None) -> None:
        view = View(events)
        blocked, lost, held = _faulted_traffic(events)
        self._context = _Context(
            view, replay_marker, frozenset(blocked), frozenset(lost), held,
            {a.invoke.index: a for a in view.attempts},
            {a.completion.index: a for a in view.attempts if a.completion})

    def diagram(self, chosen: list[Event], finding: Finding | None) -> Diagram:
        """The diagram of the ``chosen`` events (at least one, in history order); what
        ``finding`` is about is highlighted, and without a finding nothing is."""
        context = self._context
        identities = _identities(chosen)
        commits: _Commits = {}
        unplaced: dict[Identity, list[str | None]] = {}
        for identity in identities:
            placed = _commits(context, identity)
            for commit in placed:
                commits[commit.attempt.invoke.index] = commit
            unplaced[identity] = _unplaced(context, identity, placed)

        rows = _rows(chosen, context, commits, identities, finding, unplaced)
        height = TOP + ROW * len(rows) + BOTTOM
        title = f"{finding.property} {finding.key or ''}" if finding else ", ".join(
            describe_identity(i) for i in identities)
        return Diagram(
            title=title.strip(),
            width=WIDTH,
            height=height,
            lanes=tuple(Lane(name, LANE_TITLES[name], x) for name, x in LANE_X.items()),
            rows=tuple(rows),
            bands=tuple(_bands(chosen, rows, height)),
            faults=tuple(dict.fromkeys(str(e.value.get("fault")) for e in chosen
                                       if e.f == "fault")),
        )


# ---- what the history says beyond the cited events ----------------------------------------


def _faulted_traffic(events: Sequence[Event]) -> tuple[set[int], set[int], dict[int, int]]:
    """Which requests a fault stopped at Toxiproxy (invoke indices), which answers it lost there
    (completion indices), and which requests a stall held until its heal (invoke index to the
    heal's index)."""
    blocked: set[int] = set()
    lost: set[int] = set()
    held: dict[int, int] = {}
    holding: dict[str, list[Event]] = {}  # a stall's name -> the requests it holds
    active: dict[str, dict[str, object]] = {}
    at_invoke: dict[int, set[str]] = {}
    answered_at = {e.op: e.time for e in events
                   if e.f == "request" and e.type != "invoke" and e.status is not None}
    for event in events:
        name = str(event.value.get("fault"))
        if event.f == "fault" and event.value.get("where", "client") == "client":
            active[name] = dict(event.value)
        elif event.f == "heal":
            fault = active.pop(name, None)
            for request in holding.pop(name, []):
                answered = answered_at.get(request.op, event.time + 1.0) < event.time
                if (fault is not None and not answered
                        and request.time + _hold_seconds(fault) >= event.time):
                    held[request.index] = event.index
        elif event.f == "request" and event.type == "invoke":
            at_invoke[event.op] = set(active)
            if any(_blocks(v, "upstream") for v in active.values()):
                blocked.add(event.index)
            instance = event.value.get("instance", 0)
            for stall, fault in active.items():
                if _hold_seconds(fault) and fault.get("instance", instance) == instance:
                    holding.setdefault(stall, []).append(event)
        elif event.f == "request" and event.type != "invoke" and event.status is None:
            acting = at_invoke.get(event.op, set()) | set(active)
            if any(_blocks(active.get(n, {}), "downstream") for n in acting):
                lost.add(event.index)
    return blocked, lost, held


def _hold_seconds(fault: dict[str, object]) -> float:
    """How long an upstream latency toxic holds a request (0 for any other fault)."""
    if fault.get("toxic") != "latency" or fault.get("stream") != "upstream":
        return 0.0
    attributes = fault.get("attributes")
    latency = attributes.get("latency", 0) if isinstance(attributes, dict) else 0
    return float(latency) / 1000.0 if isinstance(latency, (int, float)) else 0.0


def _blocks(fault: dict[str, object], stream: str) -> bool:
    if not fault:
        return False
    if "toxic" not in fault:
        return stream == "upstream"  # the proxy is down: nothing gets through
    return fault.get("stream") == stream and fault.get("toxic") in BLOCKING


def _identities(chosen: Iterable[Event]) -> list[Identity]:
    found: dict[Identity, None] = {}
    for event in chosen:
        if event.f in ("request", "effects"):
            found.setdefault(event.identity)
    return list(found)


def _is_replay(attempt: Attempt, marker: ReplayMarker | None) -> bool:
    return bool(marker and marker.marks(attempt.headers))


def _commits(context: _Context, identity: Identity) -> list[_Commit]:
    """Which attempts of ``identity`` committed a charge, in the order they did."""
    attempts = context.view.by_identity.get(identity, [])
    committed: dict[str, Attempt] = {}
    for attempt in sorted((a for a in attempts if a.ok and a.resource), key=lambda a: a.end_time):
        resource = attempt.resource
        assert resource is not None
        if resource not in committed and not _is_replay(attempt, context.replay_marker):
            committed[resource] = attempt
    commits = [_Commit(a, r, inferred=False) for r, a in committed.items()]

    seen = context.view.effects.get(identity)
    named_elsewhere = [a.resource for a in attempts if a.ok and a.resource]
    if seen is not None and seen.ids is not None:
        orphans: list[str | None] = [r for r in dict.fromkeys([*seen.ids, *named_elsewhere])
                                     if r is not None and r not in committed]
    elif seen is not None and seen.count is not None:
        orphans = [None] * max(0, seen.count - len(committed))
    else:
        orphans = []
    unanswered = [a for a in attempts
                  if (a.completion is None or a.completion.status is None)
                  and a.invoke.index not in context.blocked
                  and (a.completion is None or a.completion.error != "connect")]
    if orphans and len(orphans) == len(unanswered):
        commits += [_Commit(a, r, inferred=True) for a, r in zip(unanswered, orphans, strict=True)]
    # A charge was made before the first answer that names it, even a replay that reached its
    # client before the committing request's own answer did.
    first_named: dict[str, float] = {}
    for attempt in attempts:
        if attempt.ok and attempt.resource:
            first_named[attempt.resource] = min(first_named.get(attempt.resource, math.inf),
                                                attempt.end_time)
    commits.sort(key=lambda c: min(
        c.attempt.end_time if c.attempt.completion else c.attempt.invoke.time,
        first_named.get(c.resource or "", math.inf)))
    return [_Commit(c.attempt, c.resource, c.inferred, n) for n, c in enumerate(commits, 1)]


def _unplaced(context: _Context, identity: Identity, placed: list[_Commit]) -> list[str | None]:
    """The charges the ledger holds that no row places at an attempt: no answer named them, and
    the attempts whose answers never came are not one each (two lost answers, one charge).
    Drawn beside the ledger, so that a diagram never counts more charges than it shows."""
    seen = context.view.effects.get(identity)
    if seen is None or seen.count is None:
        return []
    resources = {c.resource for c in placed}
    if seen.ids is not None:
        return [charge for charge in seen.ids if charge not in resources]
    return [None] * max(0, seen.count - len(placed))


# ---- rows --------------------------------------------------------------------------------


def _rows(chosen: list[Event], context: _Context, commits: _Commits, identities: list[Identity],
          finding: Finding | None, unplaced: dict[Identity, list[str | None]]) -> list[Row]:
    start = chosen[0].time
    processes = {e.process for e in chosen if e.f == "request"}
    several = len(identities) > 1
    ours = {i for i in identities
            if finding is None or finding.key is None or describe_identity(i) == finding.key}
    marks = _highlights(chosen, context, commits, ours, finding)
    rows: list[Row] = []
    present = {e.index for e in chosen}
    # Held requests whose release is drawn: their charges come after it, not at their timeout.
    released: dict[int, list[int]] = {}
    for invoke, heal in context.held.items():
        if invoke in present and heal in present:
            released.setdefault(heal, []).append(invoke)
    deferred = {invoke for invokes in released.values() for invoke in invokes}
    named = {c.resource: c for c in commits.values() if c.resource}
    drawn: set[int] = set()  # committing invokes whose commit row is drawn

    def commit_once(commit: _Commit | None, elapsed: float) -> None:
        if commit is not None and commit.attempt.invoke.index not in drawn:
            drawn.add(commit.attempt.invoke.index)
            rows.append(_commit_row(commit, rows, elapsed, marks))

    def add(kind: str, event: Event, *, highlight: bool = False, lines: tuple[Line, ...] = (),
            crosses: tuple[float, ...] = (), labels: tuple[Label, ...] = (),
            boxes: tuple[Box, ...] = ()) -> None:
        rows.append(Row(kind, TOP + ROW * len(rows), _elapsed(event.time - start),
                        tooltip(event), event.index, highlight, lines, crosses, labels, boxes))

    for event in chosen:
        if event.f == "request" and event.type == "invoke":
            who = _who(event, several=several, processes=len(processes) > 1)
            text = _request_text(event, who)
            if event.index in context.blocked:
                add("request", event, lines=(Line(LANE_X["client"], LANE_X["toxiproxy"]),),
                    crosses=(LANE_X["toxiproxy"],),
                    labels=(Label(LANE_X["client"] + 8, fit(text + " · held at Toxiproxy",
                                                             66)),))
            elif event.index in context.held:
                add("request", event, lines=(Line(LANE_X["client"], LANE_X["toxiproxy"]),),
                    labels=(Label(LANE_X["client"] + 8,
                                  fit(text + " · held at Toxiproxy until the heal", 66)),))
            else:
                add("request", event, lines=(Line(LANE_X["client"], LANE_X["server"]),),
                    labels=(Label(LANE_X["client"] + 8, fit(text, 66)),))
            commit = commits.get(event.index) if event.index not in deferred else None
            attempt = context.by_invoke.get(event.index)
            if commit and attempt and (attempt.completion is None
                                       or attempt.completion.index not in marks.present):
                commit_once(commit, event.time - start)
        elif event.f == "request":
            attempt = context.by_completion.get(event.index)
            # The charge this answer names, drawn before it if no earlier row has drawn it.
            earlier = named.get(event.resource) if event.resource else None
            if earlier is not None and earlier.attempt.invoke.index not in deferred:
                commit_once(earlier, event.time - start)
            if attempt and attempt.invoke.index not in deferred:
                commit_once(commits.get(attempt.invoke.index), event.time - start)
            who = _who(event, several=several, processes=len(processes) > 1)
            shape = _answer(event, who, context, attempt)
            add(shape.kind, event, highlight=event.index in marks.answers, lines=shape.lines,
                crosses=shape.crosses, labels=shape.labels)
        elif event.f == "effects":
            placed = sum(1 for c in commits.values() if c.attempt.identity == event.identity)
            for ordinal, charge in enumerate(unplaced.get(event.identity, []), placed + 1):
                duplicate = (finding is not None and finding.property in DUPLICATES
                             and event.identity in ours and ordinal > 1)
                rows.append(_orphan_row(charge, ordinal, rows, event.time - start, duplicate))
            add("ledger", event, highlight=event.index in marks.ledgers,
                boxes=(_box("store", _ledger_text(event, several)),))
        elif event.f in ("fault", "heal"):
            lane: LaneName = "store" if event.value.get("where") == "store" else "toxiproxy"
            name = str(event.value.get("fault"))
            if "after_write" in event.value:  # a fault at a write: which one
                name += f" {event.value['after_write']}"
            text = name if event.f == "fault" else f"healed {name}"
            add(event.f, event, boxes=(_box(lane, text, bolt=event.f == "fault"),))
            if event.index in released:
                rows.append(_release_row(released[event.index], rows, event.time - start))
                for invoke in released[event.index]:
                    commit_once(commits.get(invoke), event.time - start)
        elif event.f == "store-write":
            add("store-write", event, lines=(Line(LANE_X["server"], LANE_X["store"]),),
                labels=(Label(LANE_X["server"] + 8, fit(_store_write_text(event), 36)),))
        elif event.f == "crash":
            add("crash", event, boxes=(_box("server", f"crash ({event.value.get('how', '?')})",
                                            bolt=True),))
        elif event.f == "restart":
            add("restart", event, boxes=(_box("server", "restart"),))
        elif event.f == "clock":
            seconds = float(event.value.get("seconds", 0.0))
            outside = " from outside" if event.value.get("via") == "libfaketime" else ""
            add("clock", event,
                boxes=(_box("server", f"clock +{format_duration(seconds)}{outside}"),))
        elif event.f == "store-size":
            add("size", event, highlight=event.index in marks.sizes,
                boxes=(_box("store", f"key table: {event.value.get('rows', '?')} rows"),))
    return rows


def _store_write_text(event: Event) -> str:
    """``write 2: INSERT (COMMIT)``: a write the store proxy saw committed."""
    value = event.value
    kinds = ", ".join(str(k) for k in value.get("kinds", ())) or "write"
    return f"write {value.get('write', '?')}: {kinds} ({value.get('commit', '?')})"


def _release_row(invokes: list[int], rows: list[Row], elapsed: float) -> Row:
    """The held requests going on to the server together, the moment their stall is healed."""
    count = len(invokes)
    text = (f"{count} held requests reach the server at once" if count > 1
            else "the held request reaches the server")  # past the server lane: nothing is there
    return Row("release", TOP + ROW * len(rows), _elapsed(elapsed),
               f"Toxiproxy forwards what the stall held when it is healed: {count} request(s) "
               "of this diagram", None,
               lines=tuple(Line(LANE_X["toxiproxy"], LANE_X["server"]) for _ in invokes[:1]),
               labels=(Label(LANE_X["toxiproxy"] + 8, fit(text, 60)),))


def _commit_row(commit: _Commit, rows: list[Row], elapsed: float, marks: _Marks) -> Row:
    ordinal = ORDINALS[commit.ordinal - 1] if commit.ordinal <= len(ORDINALS) else (
        f"#{commit.ordinal}")
    resource = _short(commit.resource) if commit.resource else "a charge"
    text = f"{ordinal} charge: {resource}" if commit.ordinal > 1 else f"commit {resource}"
    if commit.inferred:
        text += " (answer lost)"
    tooltip = (f"the server committed {commit.resource or 'a charge'}"
               + (" (inferred: the ledger holds a charge no answer named)" if commit.inferred
                  else ""))
    return Row("commit", TOP + ROW * len(rows), _elapsed(elapsed), tooltip, None,
               highlight=commit.attempt.invoke.index in marks.commits,
               lines=(Line(LANE_X["server"], LANE_X["store"], dashed=commit.inferred),),
               labels=(Label(LANE_X["server"] + 8, fit(text, 36)),))


def _orphan_row(charge: str | None, ordinal: int, rows: list[Row], elapsed: float,
                highlight: bool) -> Row:
    """A charge the ledger holds that no answer named and no lost answer can be tied to."""
    name = ORDINALS[ordinal - 1] if ordinal <= len(ORDINALS) else f"#{ordinal}"
    text = f"{name} charge: {_short(charge) if charge else 'unnamed'} (no answer named it)"
    return Row("commit", TOP + ROW * len(rows), _elapsed(elapsed),
               f"the ledger holds {charge or 'a charge'}, which no answer named: the server "
               "committed it in an attempt whose answer never came", None,
               highlight=highlight,
               lines=(Line(LANE_X["server"], LANE_X["store"], dashed=True),),
               labels=(Label(LANE_X["server"] + 8, fit(text, 44)),))


@dataclass(frozen=True, slots=True)
class _Shape:
    kind: str
    lines: tuple[Line, ...]
    labels: tuple[Label, ...]
    crosses: tuple[float, ...] = ()


def _answer(event: Event, who: str, context: _Context, attempt: Attempt | None) -> _Shape:
    """An answer's arrow; one that never came shows where it was lost."""
    client, proxy, server = LANE_X["client"], LANE_X["toxiproxy"], LANE_X["server"]
    if event.status is not None:
        text = who + _status_text(event, attempt, context.replay_marker)
        return _Shape("answer", (Line(server, client),), (Label(client + 8, fit(text, 66)),))
    reason = event.error or "no answer"
    if event.error == "connect":
        return _Shape("lost", (Line(proxy, client, dashed=True),),
                      (Label(client + 8, f"{who}refused: could not connect"),), (proxy,))
    if event.index in context.lost:
        return _Shape("lost", (Line(server, proxy, arrow=False), Line(proxy, client, dashed=True)),
                      (Label(client + 8, f"{who}no answer: {reason}"),
                       Label(proxy + 12, "response lost here")), (proxy,))
    if attempt is not None and (attempt.invoke.index in context.blocked
                                or attempt.invoke.index in context.held):
        return _Shape("lost", (Line(proxy, client, dashed=True),),
                      (Label(client + 8, f"{who}no answer: {reason}"),))
    return _Shape("lost", (Line(server, client, dashed=True),),
                  (Label(client + 8, f"{who}no answer: {reason}"),), (server,))


def _status_text(event: Event, attempt: Attempt | None,
                 replay_marker: ReplayMarker | None) -> str:
    status = event.status
    assert status is not None
    if event.resource:
        text = f"{status} · {_short(event.resource)}"
    else:
        try:
            text = f"{status} {HTTPStatus(status).phrase}"
        except ValueError:
            text = str(status)
        code = _error_code(event.body)
        if code:
            text += f" · {code}"
    if attempt is not None and _is_replay(attempt, replay_marker):
        text += " · replay"
    return text


def _error_code(body: str | None) -> str | None:
    """The ``error`` (or ``status``) field of a JSON error body, the words a person reads."""
    if not body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if isinstance(data, dict):
        for name in ("error", "status", "code"):
            if isinstance(data.get(name), str):
                return str(data[name])
    return None


# ---- highlights --------------------------------------------------------------------------


@dataclass
class _Marks:
    present: set[int] = field(default_factory=set)  # indices of the cited events
    commits: set[int] = field(default_factory=set)  # invoke indices whose commit is marked
    answers: set[int] = field(default_factory=set)
    ledgers: set[int] = field(default_factory=set)
    sizes: set[int] = field(default_factory=set)


def _highlights(chosen: list[Event], context: _Context, commits: _Commits, ours: set[Identity],
                finding: Finding | None) -> _Marks:
    """The rows that show what the finding says: the duplicate, or the wrong answer."""
    marks = _Marks(present={e.index for e in chosen})
    if finding is None:
        return marks
    view = context.view
    cited = [a for a in view.attempts if a.identity in ours and (
        a.invoke.index in marks.present
        or (a.completion is not None and a.completion.index in marks.present))]
    if finding.property in DUPLICATES:
        marks.commits = {c.attempt.invoke.index for c in commits.values()
                         if c.attempt.identity in ours and c.ordinal > 1}
        for identity in ours:
            seen = view.effects.get(identity)
            if seen is None or seen.count is None or seen.index not in marks.present:
                continue
            answered = any(a.ok for a in view.by_identity.get(identity, []))
            if seen.count > 1 or (seen.count == 0 and answered):
                marks.ledgers.add(seen.index)
    if finding.property == "P2":
        for attempt in cited:
            seen = view.effects.get(attempt.identity)
            if (attempt.ok and attempt.resource and seen is not None and seen.ids is not None
                    and attempt.resource not in seen.ids and attempt.completion is not None):
                marks.answers.add(attempt.completion.index)
    if finding.property == "P8":  # every answer that is not the tenant's own charge
        for attempt in cited:
            seen = view.effects.get(attempt.identity)
            own = bool(attempt.ok and attempt.resource and seen is not None
                       and seen.ids is not None and attempt.resource in seen.ids)
            if attempt.completion is not None and attempt.answered and not own:
                marks.answers.add(attempt.completion.index)
            if seen is not None and seen.count == 0 and seen.index in marks.present:
                marks.ledgers.add(seen.index)
    if finding.property == "P11":
        marks.sizes = {e.index for e in chosen if e.f == "store-size"}
    if not (marks.commits or marks.answers or marks.ledgers or marks.sizes):
        replied = [a for a in cited if a.completion is not None
                   and a.completion.index in marks.present]
        if replied:
            latest = max(replied, key=lambda a: a.invoke.time)
            assert latest.completion is not None
            marks.answers.add(latest.completion.index)
    return marks


# ---- text --------------------------------------------------------------------------------


def _who(event: Event, *, several: bool, processes: bool) -> str:
    """Who sent it, when the diagram has more than one sender: the tenant (or key) when
    several identities share it, else the client process."""
    if several:
        return f"{_short_tenant(event.tenant) if event.tenant else (event.key or 'no key')} · "
    return f"{event.process} · " if processes else ""


def _short_tenant(tenant: str) -> str:
    return tenant.split("-", 1)[0] if "-" in tenant else fit(tenant, 12)


def _request_text(event: Event, who: str) -> str:
    parts = [f"{who}{event.method or '?'} {event.path or ''}".rstrip()]
    if event.attempt is not None:
        parts.append(f"attempt {event.attempt}")
    if event.key is None:
        parts.append("no key")
    if event.label:
        parts.append(event.label)
    return " · ".join(parts)


def _ledger_text(event: Event, several: bool) -> str:
    owner = f" {_short_tenant(event.tenant)}" if several and event.tenant else ""
    if event.type != "ok":
        return f"ledger{owner}: unknown"
    count = event.value.get("count")
    return f"ledger{owner}: {count} charge{'' if count == 1 else 's'}"


def _short(resource: str) -> str:
    return resource if len(resource) <= 14 else resource[:12] + "…"


def _elapsed(seconds: float) -> str:
    return f"+{seconds:.2f}s" if seconds < 100 else f"+{format_duration(seconds)}"


def _box(lane: LaneName, text: str, *, bolt: bool = False) -> Box:
    width = len(text) * CHAR + (34 if bolt else 20)
    x = min(max(LANE_X[lane] - width / 2, 4.0), WIDTH - width - 4)
    return Box(x, width, text, bolt)


# ---- bands -------------------------------------------------------------------------------


def _bands(chosen: list[Event], rows: list[Row], height: float) -> list[Band]:
    """Fault windows on their lane and the server's downtime, from their rows to their end."""
    tops = {row.index: row.top for row in rows if row.index is not None}
    bottom = height - BOTTOM
    bands: list[Band] = []
    open_faults: dict[str, tuple[Event, float]] = {}
    down: float | None = None
    for event in chosen:
        top = tops.get(event.index, bottom)
        name = str(event.value.get("fault"))
        if event.f == "fault":
            open_faults[name] = (event, top + ROW / 2)
        elif event.f == "heal" and name in open_faults:
            started, begin = open_faults.pop(name)
            bands.append(_fault_band(started, begin, top + ROW / 2))
        elif event.f == "crash":
            down = top + ROW / 2
        elif event.f == "restart" and down is not None:
            bands.append(Band("down", LANE_X["server"], down, top + ROW / 2, "server down"))
            down = None
    bands += [_fault_band(e, begin, bottom) for e, begin in open_faults.values()]
    if down is not None:
        bands.append(Band("down", LANE_X["server"], down, bottom, "server down"))
    return bands


def _fault_band(event: Event, top: float, bottom: float) -> Band:
    lane: LaneName = "store" if event.value.get("where") == "store" else "toxiproxy"
    return Band("fault", LANE_X[lane], top, bottom, f"{event.value.get('fault')} acting")

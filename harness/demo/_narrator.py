"""Telling a run as it happens: one line per step, in the words of the seed's story.

A handler over the run's event stream, like every report: requests sent, charges made, responses
lost at Toxiproxy, retries, replays, a second charge, the ledger's count, and then the checker's
verdict.  It states what the history records and never judges; whether a second charge breaks a
property is the checker's word, printed when the scenario ends.

The history records each answer when its client read it, which is not always the order the
server did things in.  So the narrator tells the server's order where the evidence shows it:
a replay of a charge whose own answer has not arrived yet waits for that answer (the server
made the charge before it could replay it), and a request that lost its connection because the
server died is told after the death.  A 409 is told as what it is: the original still running
only while a request with that key is still waiting for its answer.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from http import HTTPStatus

from rich.console import Console
from rich.text import Text

from harness._durations import format_duration
from harness._history import Event
from harness._outcomes import RunEvent, RunStarted, ScenarioFinished, ScenarioStarted, Step
from harness._target import ReplayMarker, Target
from harness.http._diagram import BLOCKING
from harness.http._nemesis import FAULTS
from harness.reports._explain import explain, incident_of
from harness.reports._hook_words import hooks_told

__all__ = ["Narrator"]

Identity = tuple[str | None, str | None]

#: A request this share of the promised retention after its key's first use says how long
#: after: the late retries a retention is judged by, not a retry seconds later.
_RETENTION_TOLD = 0.01

_MEANING = {
    422: "refused: this key belongs to a different request",
    400: "refused",
}


class Narrator:
    """Prints each step of a run as it happens.  ``target`` (the target file the run uses)
    tells it the replay mark, the promised lease and retention and the hooks, so a replay is
    told from a fresh execution and a held key from a running one; ``replay_marker`` alone
    does for a history without a target."""

    def __init__(self, console: Console, *, replay_marker: ReplayMarker | None = None,
                 target: Target | None = None) -> None:
        self.console = console
        self.target = target
        promises = target.promises if target is not None else None
        self.replay_marker = replay_marker or (promises.replay_marker if promises else None)
        self.lease = promises.lease if promises else None
        self.retention = promises.retention if promises else None
        self.in_progress = promises.in_progress_statuses if promises else frozenset({409})
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        #: A history that publishes is a queue consumer's: its processes are consumers.
        self._publishes = False
        self._aliases: dict[str, str] = {}
        self._tenants: set[str] = set()
        # Arrival: what is in flight, and what waits to be told in the server's order.
        self._running: dict[int, Event] = {}  # op -> the invoke still waiting for its answer
        self._sent_at: dict[int, Event] = {}  # op -> its invoke
        self._ended: dict[int, float] = {}  # op -> when its answer (or its loss) arrived
        self._lost: Event | None = None  # an answer that never came, until the next event
        self._early: dict[Identity, list[Event]] = defaultdict(list)  # replays before commits
        self._named: dict[Identity, set[str]] = defaultdict(set)  # charges told so far
        self._died: set[int] = set()  # ops the server died in
        self._crashed: dict[Identity, float] = {}  # keys in use when the server died -> when
        # Telling: the story so far.
        self._clock = 0.0
        self._charges: dict[Identity, list[str]] = defaultdict(list)  # this retention window's
        self._told: dict[Identity, list[str]] = defaultdict(list)  # every charge named
        self._first: dict[Identity, str | None] = {}  # the key's first request's fingerprint
        self._window: dict[Identity, float] = {}  # when the key's retention window began
        self._windows: dict[Identity, int] = defaultdict(lambda: 1)
        self._renewed: set[int] = set()  # ops that came after the key expired
        self._losing: set[str] = set()
        self._unanswered: set[Identity] = set()
        self._streak: tuple[object, ...] | None = None  # a refusal that keeps coming back
        self._repeats = 0
        self._held: Text | None = None  # a retry's line, shown only if its answer differs

    def handle(self, event: RunEvent) -> None:
        with self._lock:
            if isinstance(event, RunStarted):
                self.console.print(Text(f"target {event.target.name}", style="dim"))
            elif isinstance(event, ScenarioStarted):
                self._reset()
                self.console.print(Text(f"scenario {event.name}", style="bold"))
            elif isinstance(event, Step):
                for step in self._arrive(event.event):
                    self._print(self._lines(step))
            elif isinstance(event, ScenarioFinished):
                for step in self._drain():
                    self._print(self._lines(step))
                self._print(self._flush())
                self._verdict(event)

    def _print(self, lines: list[Text]) -> None:
        for line in lines:
            self.console.print(line)

    # ---- the server's order --------------------------------------------------------------

    def _arrive(self, event: Event) -> list[Event]:
        """The events to tell now, in the order the server did them, for ``event`` arriving."""
        ready: list[Event] = []
        if self._lost is not None:
            lost, self._lost = self._lost, None
            if event.f == "crash":  # the server died first; the client saw it afterwards
                self._died.add(lost.op)
                self._note_crash(event)
                return [event, lost, *self._settle(lost)]
            ready += [lost, *self._settle(lost)]
        if event.f == "crash":
            self._note_crash(event)
        if event.f != "request":
            return [*ready, event]
        if event.type == "invoke":
            self._running[event.op] = event
            self._sent_at[event.op] = event
            return [*ready, event]
        sent = self._running.pop(event.op, None)
        self._ended[event.op] = event.time
        if event.status is None and sent is not None and event.error != "connect":
            self._lost = event  # did the server die in it? the next event says
            return ready
        if self._replays_unseen_charge(event):
            self._early[event.identity].append(event)
            return ready
        if event.resource:
            self._named[event.identity].add(event.resource)
        waiting = self._early.get(event.identity, [])
        released = [e for e in waiting if e.resource == event.resource]
        self._early[event.identity] = [e for e in waiting if e not in released]
        return [*ready, event, *released, *self._settle(event)]

    def _replays_unseen_charge(self, event: Event) -> bool:
        """A replay naming a charge no answer has named yet, while another request with its key
        still runs: that request made the charge, and its answer is on the way."""
        return bool(event.resource and self.replay_marker
                    and self.replay_marker.marks(event.headers)
                    and event.resource not in self._named[event.identity]
                    and any(s.identity == event.identity for s in self._running.values()))

    def _settle(self, event: Event) -> list[Event]:
        """Replays still waiting once nothing with their key runs any more: their charge's own
        answer never came, so they are told now."""
        if any(s.identity == event.identity for s in self._running.values()):
            return []
        return self._early.pop(event.identity, [])

    def _note_crash(self, event: Event) -> None:
        """Requests in flight die with the server; every key in use may be left claimed."""
        self._died.update(self._running)
        when = event.time + self._clock
        for identity in {*self._named, *(s.identity for s in self._running.values()),
                         *self._window}:
            self._crashed[identity] = when

    def _drain(self) -> list[Event]:
        ready = [self._lost] if self._lost is not None else []
        self._lost = None
        for waiting in self._early.values():
            ready += waiting
        self._early.clear()
        return ready

    # ---- one step ----------------------------------------------------------------------

    def _lines(self, event: Event) -> list[Text]:
        """The step's line, folding a retry that gets the same refusal again into a count."""
        if event.f == "request" and self._streak is not None:
            if event.type == "invoke" and self._streak[:2] == (event.identity, event.process):
                self._held = self._sent(event)
                return []
            if (event.type != "invoke" and self._held is not None
                    and self._streak == _signature(event)):
                self._held, self._repeats = None, self._repeats + 1
                return []
        lines = self._flush()
        line = self._line(event)
        if event.f == "request" and event.type != "invoke" and (event.status or 0) >= 400:
            self._streak = _signature(event)
        return [*lines, line] if line is not None else lines

    def _flush(self) -> list[Text]:
        lines = []
        if self._repeats:
            more = "1 more retry" if self._repeats == 1 else f"{self._repeats} more retries"
            lines.append(_say("  … ", f"{more}, each answered the same", "dim"))
        if self._held is not None:
            lines.append(self._held)
        self._streak, self._repeats, self._held = None, 0, None
        return lines

    def _line(self, event: Event) -> Text | None:
        if event.f == "request" and event.type == "invoke":
            return self._sent(event)
        if event.f == "request":
            return self._answered(event)
        if event.f in _CONSUMER_STEPS:
            self._publishes = self._publishes or event.f == "publish"
            return self._consumer_step(event)
        if event.f in ("fault", "heal"):
            return self._fault(event)
        if event.f == "crash" and self._publishes and "instance" in event.value:
            return _say("  ✖ ", f"consumer-{event.value['instance']} dies "
                                f"({event.value.get('how', 'killed')})", "bold red")
        if event.f == "restart" and self._publishes and "instance" in event.value:
            return _say("  ↻ ", f"consumer-{event.value['instance']} is started again", "cyan")
        if event.f == "crash":
            return _say("  ✖ ", f"the server process dies ({event.value.get('how', 'killed')})",
                        "bold red")
        if event.f == "restart":
            return _say("  ↻ ", "the server is started again", "cyan")
        if event.f == "clock":
            return self._jump(event)
        if event.f == "effects":
            return self._ledger(event)
        if event.f == "store-size":
            return _say("  ▤ ", f"the key table holds {event.value.get('rows', '?')} rows", "dim")
        return None

    def _now(self, event: Event) -> float:
        """The target's time: the history's, plus every jump of its clock so far."""
        return event.time + self._clock

    def _who(self, event: Event) -> str:
        if event.key is None:
            subject = "no key"
        else:
            alias = self._aliases.setdefault(event.key, f"K{len(self._aliases) + 1}")
            subject = f"key {alias}"
        if event.tenant:
            self._tenants.add(event.tenant)
            if len(self._tenants) > 1:
                subject += f" as {event.tenant.split('-', 1)[0]}"
        return subject

    def _sent(self, event: Event) -> Text:
        label = f" ({event.label})" if event.label else ""
        retry = "retries" if (event.attempt or 1) > 1 else "sends"
        hooks = "".join(f", {w}" for w in hooks_told(event, self.target)) if self.target else ""
        first = self._first.setdefault(event.identity, event.fingerprint)
        other = (", a different request under the same key"
                 if event.key is not None and event.fingerprint != first else "")
        return _say("→ ", f"{event.process} {retry} {event.method} {event.path} with "
                          f"{self._who(event)}, attempt {event.attempt}{label}{other}{hooks}"
                          f"{self._age(event)}", "")

    def _age(self, event: Event) -> str:
        """How long after its key's first use a request came, when the promised retention is
        in question; a request after the key expired opens a new retention window."""
        if event.key is None:
            return ""
        now, identity = self._now(event), event.identity
        began = self._window.setdefault(identity, now)
        if self.retention is None or now - began < self.retention * _RETENTION_TOLD:
            return ""
        age, promised = format_duration(now - began), format_duration(self.retention)
        just = "just " if age == promised else ""
        if now - began <= self.retention:
            return (f", {age} after the key's first use: {just}within the promised retention "
                    f"of {promised}")
        self._window[identity] = now
        self._windows[identity] += 1
        self._charges[identity] = []
        self._renewed.add(event.op)
        return (f", {age} after the key's first use: {just}past the promised retention of "
                f"{promised}")

    def _answered(self, event: Event) -> Text:
        who = self._who(event)
        if event.status is None:
            self._unanswered.add(event.identity)
            if event.op in self._died:
                return _say("  ✗ ", f"no answer for {who} ({event.error}): the server died "
                            "with the request in it. Had it charged before it died? The "
                            "ledger will tell", "bold yellow")
            if self._losing:
                return _say("  ✗ ", f"no answer for {who} ({event.error}): the response was "
                            "lost on its way back. The card may have been charged; the client "
                            "cannot know, so it retries with the same key", "bold yellow")
            return _say("  ✗ ", f"no answer for {who} ({event.error})", "yellow")
        if event.resource:
            return self._charged(event, who)
        meaning = (self._in_progress(event) if event.status in self.in_progress
                   else _MEANING.get(event.status))
        if meaning is None and 200 <= event.status < 300:
            meaning = "a success that names no charge"
        return _say(f"← {event.process} gets ", f"{event.status} {_phrase(event)} for {who}"
                                                + (f": {meaning}" if meaning else ""), "")

    def _in_progress(self, event: Event) -> str:
        """What an in-progress answer means here: another request running only if one with the
        key was waiting for its answer while this one was."""
        mine = self._sent_at.get(event.op)
        began = mine.time if mine is not None else event.time
        overlapping = sorted({s.process for op, s in self._sent_at.items()
                              if op != event.op and s.identity == event.identity
                              and s.time <= event.time
                              and self._ended.get(op, event.time) >= began})
        if len(overlapping) > 3:
            return (f"{len(overlapping)} other requests with this key are running; come back "
                    "shortly")
        if overlapping:
            return (f"another request with this key ({', '.join(overlapping)}) is running; "
                    "come back shortly")
        died = self._crashed.get(event.identity)
        if died is None:
            return ("the key is still marked in progress, though no request with it is "
                    "waiting for an answer")
        told = ("the key is still marked in progress, but the request that claimed it died "
                "with the server: nothing is running it")
        if self.lease is not None and self._now(event) - died > self.lease:
            told += f", and its lease of {format_duration(self.lease)} has run out"
        return told

    def _charged(self, event: Event, who: str) -> Text:
        got = f"← {event.process} gets {event.status} for {who}: "
        identity, resource = event.identity, event.resource or ""
        charges = self._charges[identity]
        replay = bool(self.replay_marker and self.replay_marker.marks(event.headers))
        if resource in charges or replay:
            return _say(got, f"the stored response, replayed ({resource})", "green")
        charges.append(resource)
        self._told[identity].append(resource)
        if event.op in self._renewed:
            return _say(got, f"the key had expired, so the server ran the request as a new "
                             f"operation and charged {resource}, as the contract allows",
                        "cyan")
        if len(charges) > 1:
            return _say(got, f"the server answered with ANOTHER charge, {resource}: charge "
                             f"number {len(charges)} for one key", "bold red")
        if identity in self._unanswered:
            return _say(got, f"not a replay: the server ran the request as new and charged "
                             f"{resource}. Did the lost attempt charge too? The ledger "
                             "will tell", "bold yellow")
        return _say(got, f"the server ran the request and answered with a new charge, "
                         f"{resource}{self._others_waiting(event)}", "")

    def _others_waiting(self, event: Event) -> str:
        """``, while c0 still waits with the same key``: other requests of the key in flight."""
        others = sorted({s.process for s in self._running.values()
                         if s.identity == event.identity and s.op != event.op})
        if not others:
            return ""
        if len(others) == 1:
            return f", while {others[0]} still waits with the same key"
        if len(others) <= 3:
            return f", while {', '.join(others[:-1])} and {others[-1]} still wait with the same key"
        return f", while {len(others)} other clients still wait with the same key"

    def _consumer_step(self, event: Event) -> Text | None:
        """A queue consumer's step: a publish and its confirm, what a consumer reported doing
        (its events feed), and what the drain found."""
        who = self._who(event) if event.key is not None else ""
        value = event.value
        if event.f == "publish" and event.type == "invoke":
            pause = value.get("pause") or {}
            paused = (f", asking the consumer to pause {pause.get('point')} for "
                      f"{format_duration(float(pause.get('seconds', 0)))}" if pause else "")
            return _say("→ ", f"the producer publishes {who} ({event.label or 'a job'})"
                              f"{paused}", "")
        if event.f == "publish":
            outcome = {"ok": "confirmed", "fail": "refused"}.get(event.type, "no confirm")
            return _say("  ← ", f"the broker: {outcome}" + (f" ({event.error})"
                                                            if event.error else ""), "dim")
        if event.f == "drain":
            return _say("  ▤ ", f"the queue is drained: {value.get('left', 0)} left, "
                                f"{value.get('dead_lettered', 0)} dead-lettered", "dim")
        words = {"deliver": "takes", "claim": "claims", "commit": "commits the charge for",
                 "ack-lost": "cannot settle", "dead-letter": "dead-letters",
                 "wait": "waits: another consumer holds", "left-group": "leaves its group"}
        if event.f == "pause":
            told = f"pauses {value.get('point', '')} in {who}"
        elif event.f == "ack":
            told = f"{value.get('as', 'acks')} {who} ({value.get('outcome', '')})"
        else:
            told = f"{words.get(event.f, event.f)} {who}".rstrip()
        style = "bold red" if event.f == "commit" and self._committed(event) else ""
        return _say("  · ", f"{event.process} {told}", style)

    def _committed(self, event: Event) -> bool:
        """A second charge for a key: the moment a flaw shows."""
        seen = self._charges[event.identity]
        seen.append(str(event.value.get("charge")))
        return len(seen) > 1

    def _fault(self, event: Event) -> Text:
        name = str(event.value.get("fault"))
        fault = FAULTS.get(name)
        summary = fault.summary if fault else name
        if event.f == "heal":
            self._losing.discard(name)
            return _say("  ✓ ", f"Toxiproxy heals {name}", "dim")
        if event.value.get("stream") == "downstream" and event.value.get("toxic") in BLOCKING:
            self._losing.add(name)
        where = "the store's proxy" if event.value.get("where") == "store" else "Toxiproxy"
        return _say("  ⚡ ", f"{where}: {summary} ({name})", "bold magenta")

    def _jump(self, event: Event) -> Text:
        seconds = float(event.value.get("seconds", 0.0))
        self._clock += seconds
        whose = "the consumers'" if self._publishes else "the server's"
        told = f"{whose} clock jumps {format_duration(seconds)} forward"
        claimed = self._running or self._crashed
        if self.lease is not None and seconds > self.lease and claimed:
            told += f": past the promised lease of {format_duration(self.lease)}"
        return _say("  ⏩ ", told, "magenta")

    def _ledger(self, event: Event) -> Text:
        who = self._who(event)
        if event.type != "ok":
            return _say("  ▤ ", f"the ledger could not be read for {who}: {event.error}",
                        "yellow")
        count = int(event.value.get("count", 0))
        ids = event.value.get("ids")
        listed = f" ({', '.join(ids)})" if isinstance(ids, list) and ids else ""
        held = f"the ledger holds {count} charge{'' if count == 1 else 's'} for {who}{listed}"
        missing = [r for r in self._told[event.identity]
                   if isinstance(ids, list) and r not in ids]
        if missing:
            told = "a client was told, is" if len(missing) == 1 else "clients were told, are"
            return _say("  ▤ ", f"{held}: {', '.join(missing)}, which {told} not there",
                        "bold red")
        windows = self._windows[event.identity]
        if 1 < count <= windows:
            return _say("  ▤ ", f"{held}: one for each retention window the key lived through",
                        "dim")
        if count > 1:
            return _say("  ▤ ", f"{held}: {count} charges for one operation", "bold red")
        return _say("  ▤ ", held, "green" if count == 1 else "dim")

    # ---- the verdict -------------------------------------------------------------------

    def _verdict(self, event: ScenarioFinished) -> None:
        outcome = event.outcome
        style = {"pass": "bold green", "fail": "bold red"}.get(outcome.verdict, "yellow")
        self.console.print(Text(f"checker: {outcome.verdict.upper()}", style=style)
                           + Text(f"  ({outcome.reason})" if outcome.reason else "",
                                  style="dim"))
        by_index = {e.index: e for e in outcome.events}
        for finding in outcome.findings:
            colour = "red" if finding.klass == "safety" else "yellow"
            plain = explain(finding.property, incident=incident_of(
                by_index[i] for i in finding.events if i in by_index))
            self.console.print(Text(f"  {finding.property} {finding.klass}: ", style=colour)
                               + Text(plain.headline, style="bold"))
            self.console.print(Text(f"    {finding.message}", style="dim"), soft_wrap=True)


#: The queue consumer's steps the narrator tells (the rest of its events feed is left out).
_CONSUMER_STEPS = frozenset({"publish", "deliver", "claim", "wait", "pause", "commit", "ack",
                             "ack-lost", "dead-letter", "left-group", "drain"})


def _signature(event: Event) -> tuple[object, ...]:
    """What makes two answers the same for folding: who asked, and status and body."""
    return (event.identity, event.process, event.status, event.body_digest)


def _say(mark: str, words: str, style: str) -> Text:
    return Text(mark, style=style or "bold") + Text(words, style=style)


def _phrase(event: Event) -> str:
    """``Conflict [in_progress]``: the status's phrase and the error code of its body."""
    status = event.status or 0
    try:
        text = HTTPStatus(status).phrase
    except ValueError:
        text = ""
    code = None
    if event.body:
        try:
            data = json.loads(event.body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            code = next((str(data[k]) for k in ("error", "status")
                         if isinstance(data.get(k), str)), None)
    if code:
        text += f" [{code}]"
    return text

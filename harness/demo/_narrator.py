"""Telling a run as it happens: one line per step, in the words of the seed's story.

A handler over the run's event stream, like every report: requests sent, charges committed,
responses lost at Toxiproxy, retries, replays, a second charge, the ledger's count, and then the
checker's verdict.  It states what the history records and never judges; whether a second charge
breaks a property is the checker's word, printed when the scenario ends.
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
from harness._nemesis import FAULTS
from harness._outcomes import RunEvent, RunStarted, ScenarioFinished, ScenarioStarted, Step
from harness._target import ReplayMarker
from harness.reports._explain import explain
from harness.reports._sequence import BLOCKING

__all__ = ["Narrator"]

_MEANING = {
    409: "the original is still running; come back shortly",
    422: "refused: this key belongs to a different request",
    400: "refused",
}


class Narrator:
    """Prints each step of a run as it happens; ``replay_marker`` names the target's replay
    mark, so a replay can be told from a fresh execution."""

    def __init__(self, console: Console, *, replay_marker: ReplayMarker | None = None) -> None:
        self.console = console
        self.replay_marker = replay_marker
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._aliases: dict[str, str] = {}
        self._tenants: set[str] = set()
        self._charges: dict[tuple[str | None, str | None], list[str]] = defaultdict(list)
        self._losing: set[str] = set()
        self._unanswered: set[tuple[str | None, str | None]] = set()
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
                for line in self._lines(event.event):
                    self.console.print(line)
            elif isinstance(event, ScenarioFinished):
                for line in self._flush():
                    self.console.print(line)
                self._verdict(event)

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
        if event.f in ("fault", "heal"):
            return self._fault(event)
        if event.f == "crash":
            return _say("  ✖ ", f"the server process dies ({event.value.get('how', 'killed')})",
                        "bold red")
        if event.f == "restart":
            return _say("  ↻ ", "the server is started again", "cyan")
        if event.f == "clock":
            seconds = float(event.value.get("seconds", 0.0))
            return _say("  ⏩ ", f"the server's clock jumps {format_duration(seconds)} forward",
                        "magenta")
        if event.f == "effects":
            return self._ledger(event)
        if event.f == "store-size":
            return _say("  ▤ ", f"the key table holds {event.value.get('rows', '?')} rows", "dim")
        return None

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
        return _say("→ ", f"{event.process} {retry} {event.method} {event.path} with "
                          f"{self._who(event)}, attempt {event.attempt}{label}", "")

    def _answered(self, event: Event) -> Text:
        who = self._who(event)
        if event.status is None:
            self._unanswered.add(event.identity)
            if self._losing:
                return _say("  ✗ ", f"no answer for {who} ({event.error}): the response was "
                            "lost on its way back. The card may have been charged; the client "
                            "cannot know, so it retries with the same key", "bold yellow")
            return _say("  ✗ ", f"no answer for {who} ({event.error})", "yellow")
        if event.resource:
            return self._charged(event, who)
        return _say(f"← {event.process} gets ", f"{event.status} {_phrase(event)} for {who}",
                    "")

    def _charged(self, event: Event, who: str) -> Text:
        got = f"← {event.process} gets {event.status} for {who}: "
        charges = self._charges[event.identity]
        replay = bool(self.replay_marker and self.replay_marker.marks(event.headers))
        if event.resource in charges or replay:
            return _say(got, f"the stored response, replayed ({event.resource})", "green")
        charges.append(event.resource or "")
        if len(charges) > 1:
            return _say(got, f"the server committed ANOTHER charge, {event.resource}: charge "
                             f"number {len(charges)} for one key", "bold red")
        if event.identity in self._unanswered:
            return _say(got, f"not a replay: the server ran the request as new and charged "
                             f"{event.resource}. Did the lost attempt charge too? The ledger "
                             "will tell", "bold yellow")
        return _say(got, f"the server committed charge {event.resource} and answered", "")

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

    def _ledger(self, event: Event) -> Text:
        who = self._who(event)
        if event.type != "ok":
            return _say("  ▤ ", f"the ledger could not be read for {who}: {event.error}",
                        "yellow")
        count = int(event.value.get("count", 0))
        ids = event.value.get("ids")
        listed = f" ({', '.join(ids)})" if isinstance(ids, list) and ids else ""
        if count > 1:
            return _say("  ▤ ", f"the ledger holds {count} charges for {who}{listed}: "
                        f"{count} charges for one operation", "bold red")
        return _say("  ▤ ", f"the ledger holds {count} charge{'' if count == 1 else 's'} for "
                    f"{who}{listed}", "green" if count == 1 else "dim")

    # ---- the verdict -------------------------------------------------------------------

    def _verdict(self, event: ScenarioFinished) -> None:
        outcome = event.outcome
        style = {"pass": "bold green", "fail": "bold red"}.get(outcome.verdict, "yellow")
        self.console.print(Text(f"checker: {outcome.verdict.upper()}", style=style)
                           + Text(f"  ({outcome.reason})" if outcome.reason else "",
                                  style="dim"))
        for finding in outcome.findings:
            colour = "red" if finding.klass == "safety" else "yellow"
            self.console.print(Text(f"  {finding.property} {finding.klass}: ", style=colour)
                               + Text(explain(finding.property).headline, style="bold"))
            self.console.print(Text(f"    {finding.message}", style="dim"), soft_wrap=True)


def _signature(event: Event) -> tuple[object, ...]:
    """What makes two answers the same for folding: who asked, and status and body."""
    return (event.identity, event.process, event.status, event.body_digest)


def _say(mark: str, words: str, style: str) -> Text:
    return Text(mark, style=style or "bold") + Text(words, style=style)


def _phrase(event: Event) -> str:
    """``Conflict [in_progress]: the original is still running; come back shortly``."""
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
    if status in _MEANING:
        text += f": {_MEANING[status]}"
    return text

"""A finding's reproduction: what its script carries, so that it works after the run.

A run's target listens on a port that is gone when the run ends, and its store goes with it.
So a finding's script carries its story and how to start the target again, and plays the story
through the harness: the same client, Toxiproxy faults, kills, restarts and clock moves, against
a fresh instance started as the run started it.  Then the checker judges the replay, and the
script says whether the finding's properties broke again.

The story of a finding with a key is its key's requests (and the ones it cites), with what the
nemesis and the oracle did from the first to the last of them: a load run's finding too.  A
finding without a key (a store that grows, a server that stopped serving) is about the whole
scenario: the scenario is played again from the catalog with the run's seed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness._errors import UsageError
from harness._history import NEMESIS, ORACLE, Event, event_from_json, event_to_json
from harness._target import Target
from harness.judging._analysis import describe_identity
from harness.judging._findings import Finding
from harness.targets._reference import reference_options

__all__ = [
    "FORMAT",
    "NOT_REPRODUCED",
    "NO_REPLAY",
    "PLAYED",
    "REPRODUCED",
    "EventIndex",
    "Reproduction",
    "reproduction_for",
]

FORMAT = "idem-harness-reproduction"
#: Exit codes of a reproduction, as a test's: the finding is still there, it is not, no verdict.
REPRODUCED, NOT_REPRODUCED, NO_REPLAY = 1, 0, 2
#: What the nemesis and the oracle did that a replay does again (other events are the run's own
#: bookkeeping, or are noticed again by the replay itself, such as a process that exited).
PLAYED = frozenset({"fault", "heal", "crash", "restart", "clock", "lease-not-waited",
                    "store-size", "effects", "effects-total", "in-progress"})


@dataclass(frozen=True)
class Reproduction:
    """What a reproduction script carries.

    ``reference`` says the target was the built-in reference server (``flaw`` and ``store``,
    ``sqlite`` or ``postgresql``), started again as ``--reference`` starts it, on a fresh
    store; otherwise ``target`` (the definition as the run saved it) is started as its file
    says.  ``events`` is the story to play; empty, the catalog's ``scenario`` is played again
    with ``seed``."""

    scenario: str
    seed: int
    properties: tuple[str, ...]
    key: str | None
    messages: tuple[str, ...]
    target: dict[str, Any]
    reference: dict[str, Any] | None = None
    events: tuple[Event, ...] = field(default=())

    @property
    def plays_scenario(self) -> bool:
        return not self.events

    def to_json(self) -> str:
        data = {"format": FORMAT, "version": 1, "scenario": self.scenario, "seed": self.seed,
                "properties": list(self.properties), "key": self.key,
                "messages": list(self.messages), "reference": self.reference,
                "target": self.target, "events": [event_to_json(e) for e in self.events]}
        return json.dumps(data, indent=1, ensure_ascii=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, source: str) -> Reproduction:
        """Read what a script carries, or say what is wrong with it (exit 2)."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"its \"format\" is not {FORMAT!r}")
            return cls(str(data["scenario"]), int(data["seed"]),
                       tuple(str(p) for p in data["properties"]), data.get("key"),
                       tuple(str(m) for m in data.get("messages", [])), dict(data["target"]),
                       data.get("reference"),
                       tuple(event_from_json(e) for e in data.get("events", [])))
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{source} is not a reproduction the harness wrote ({exc}); run "
                             "the finding's script from the report directory as it was "
                             "written") from exc


class EventIndex:
    """One scenario's history, indexed once for the stories of all its findings (a load run
    has thousands of findings over a history of a hundred thousand events)."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.by_index = {e.index: e for e in events}
        self.ops: dict[int, list[Event]] = defaultdict(list)
        self.by_identity: dict[str, set[int]] = defaultdict(set)
        for event in events:
            if event.f == "request":
                self.ops[event.op].append(event)
                if event.type == "invoke" and event.key is not None:
                    self.by_identity[event.key].add(event.op)
                    self.by_identity[describe_identity(event.identity)].add(event.op)
        self.played = [e for e in events if e.f in PLAYED and e.process in (NEMESIS, ORACLE)]

    def story(self, findings: Iterable[Finding]) -> tuple[Event, ...]:
        """Every request of the findings' key, and every one they cite, with what the nemesis
        and the oracle did from the first to the last of them; empty without a key."""
        findings = list(findings)
        key = findings[0].key
        if key is None:
            return ()
        wanted = set(self.by_identity.get(key, set()))
        for finding in findings:
            for index in finding.events:
                event = self.by_index.get(index)
                if event is not None and event.f == "request":
                    wanted.add(event.op)
        requests = [e for op in wanted for e in self.ops[op]]
        if not requests:
            return ()
        first, last = min(e.time for e in requests), max(e.time for e in requests)
        keys = {e.key for e in requests}
        around = [e for e in self.played if first <= e.time <= last
                  and (e.f not in ("effects", "lease-not-waited") or e.key in keys)]
        return tuple(sorted(requests + around + self._acting_at(first), key=lambda e: e.index))

    def _acting_at(self, moment: float) -> list[Event]:
        """The faults already acting when the story begins (a load's chaos window it fell
        into), moved to its start: the story plays them, and their heal, too."""
        acting: dict[tuple[object, ...], Event] = {}
        for event in self.played:
            if event.time >= moment:
                break
            where = (event.value.get("fault"), event.value.get("instance"))
            if event.f == "fault":
                acting[where] = event
            elif event.f == "heal":
                acting.pop(where, None)
        return [replace(event, time=moment) for event in acting.values()]


def reproduction_for(findings: Sequence[Finding], index: EventIndex, target: Target, *,
                     scenario: str, seed: int) -> Reproduction:
    """The reproduction of ``findings`` (one key's, or one finding without a key) of
    ``scenario``."""
    reference = reference_options(target)
    definition = target.model_dump(mode="json")
    start = target.start
    if start is not None and start.cwd is not None and not Path(start.cwd).is_absolute() \
            and target.source:  # the script runs from anywhere
        definition["start"]["cwd"] = str(Path(target.source).absolute().parent / start.cwd)
    properties = tuple(dict.fromkeys(f.property for f in findings))
    return Reproduction(scenario, seed, properties, findings[0].key,
                        tuple(f"{f.property}: {f.message}" for f in findings), definition,
                        reference, index.story(findings))

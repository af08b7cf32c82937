"""The failure modes a trainer can show: each named flaw and the scenario that exposes it.

Each named flaw of the reference server, the catalog scenario that exposes it, and, where the
seed's list of common mistakes names it, its words.

Which scenario exposes which flaw is what ``idem-harness matrix`` measures; this table keeps, for
each flaw, the smallest scenario that catches it as a property the flaw breaks.  A flaw that no
scenario catches yet has no scenario, and the demo says so instead of showing a run that holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from harness._errors import UsageError
from reference_server.consumer.flaws import KAFKA_CONSUMER_FLAWS
from reference_server.flaws import FLAWS, Flaw

__all__ = ["ARTICLE", "CRASH_POINT", "KAFKA_SCENARIO_FOR", "PITFALLS", "SCENARIO_FOR",
           "FailureMode", "failure_mode", "failure_modes", "mode_lines"]

#: flaw -> the scenario that shows it (from the flaw matrix: caught, and as the right property).
SCENARIO_FOR: dict[str, str] = {
    "server-generated-key": "timeout-after-commit",
    "no-body-hash": "key-reuse",
    "key-only": "in-flight-retry",
    "short-ttl": "late-retry",
    "no-cleanup": "bounded-storage",
    "check-then-insert": "concurrent-retries",
    "insert-after-work": "concurrent-retries",
    "stuck-after-crash": "crash-mid-request",
    "split-commit": "crash-mid-request",
    "no-tenant-scope": "tenant-collision",
    "no-fencing": "zombie-original",
    "ack-before-commit": "crash-mid-request",
}

#: The reference Kafka consumer's flaws a trainer can show (issue 40), each with the scenario
#: that shows it on Kafka: a rebalance hands a record to a member that never saw it, and a
#: kill before the work finds the record's offset already committed.
KAFKA_SCENARIO_FOR: dict[str, str] = {
    "dedup-in-memory": "cold-reassignment",
    "commit-before-work": "consumer-crash",
}

#: flaw -> the one crash point that shows it, so its demo does not wait out the other points.
CRASH_POINT: dict[str, str] = {
    "stuck-after-crash": "after-claim",
    "split-commit": "after-work",
    "ack-before-commit": "after-work",
}

#: The article the harness was built from; its list of common mistakes is quoted below.
ARTICLE = "Idempotency Keys in Distributed Systems: The Rules That Save You From Duplicates"
#: flaw -> the article's "common mistakes" entry it reproduces, in the article's words.
PITFALLS: dict[str, str] = {
    "server-generated-key": "Server generates the key. Now every retry has a different key and "
                            "idempotency does nothing.",
    "no-body-hash": "Key without body hash. A buggy client reuses a key for a different "
                    "request; you happily return the wrong response.",
    "key-only": "Storing only the key, not the response. You know it was processed, but can't "
                "tell the client what happened.",
    "short-ttl": "TTL too short. A client that retries after 6 hours (yes, they exist) hits a "
                 "fresh row and double-charges.",
    "no-cleanup": "TTL too long. The table grows unbounded, indexes slow down, cleanup jobs "
                  "pile up.",
}

_HEADING = re.compile(r"^[A-Z][A-Za-z ]{0,15}: ")


@dataclass(frozen=True)
class FailureMode:
    """A flaw to show: of the reference server (``broker`` None), or of the reference consumer
    on ``broker``."""

    flaw: Flaw[Any]
    scenario: str | None
    pitfall: str | None
    crash_point: str | None = None
    broker: str | None = None

    @property
    def name(self) -> str:
        return self.flaw.name

    @property
    def summary(self) -> str:
        return self.flaw.summary

    @property
    def paragraphs(self) -> tuple[str, ...]:
        """The flaw's docstring after its first line: "Mistake: ...", "Breaks: ...", "See it:"
        each a paragraph of its own."""
        lines = self.flaw.doc.strip().splitlines()[1:]
        paragraphs: list[list[str]] = []
        for line in (raw.strip() for raw in lines):
            if not line:
                paragraphs.append([])
            elif _HEADING.match(line) or not paragraphs:
                paragraphs.append([line])
            else:
                paragraphs[-1].append(line)
        return tuple(" ".join(p) for p in paragraphs if p)


def failure_modes() -> list[FailureMode]:
    """Every named flaw, in the reference server's order."""
    return [FailureMode(flaw, SCENARIO_FOR.get(name), PITFALLS.get(name), CRASH_POINT.get(name))
            for name, flaw in FLAWS.items()] + [
        FailureMode(KAFKA_CONSUMER_FLAWS[name], scenario, None, broker="kafka")
        for name, scenario in KAFKA_SCENARIO_FOR.items()]


def failure_mode(name: str) -> FailureMode:
    for mode in failure_modes():
        if mode.name == name:
            return mode
    known = [mode.name for mode in failure_modes()]
    raise UsageError(f"unknown failure mode {name!r}; choose one of: {', '.join(known)} "
                     "(`idem-harness demo --list` says what each one is)")


def mode_lines(modes: list[FailureMode]) -> list[str]:
    """One line per failure mode: its name, what it is, and what shows it."""
    width = max(len(m.name) for m in modes)
    lines = []
    for mode in modes:
        shown = f"scenario {mode.scenario}" if mode.scenario else "no scenario exposes it yet"
        if mode.broker is not None:
            shown += f", the reference consumer on {mode.broker.capitalize()}"
        quoted = (f'; the article\'s common mistake "{mode.pitfall.split(".")[0]}"'
                  if mode.pitfall else "")
        lines.append(f"{mode.name:<{width}}  {mode.summary}  [{shown}{quoted}]")
    if any(mode.pitfall for mode in modes):
        lines.append(f'(common mistakes quoted from the article "{ARTICLE}")')
    return lines

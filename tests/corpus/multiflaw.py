"""Corpus services and consumers started with several flaws at once (issue 37): the modes of
``multiflaw.toml`` and of the consumer corpus's ``flaws.toml`` (``[[combined]]``), the seeds
each is explored at, and what it takes for one exploration to have reported every flaw of a
mode: each flaw matched to a kept failure of its own that names one of its properties, so
that two flaws told as one failure never pass for both."""

from __future__ import annotations

import tomllib
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness._profiles import in_ci

__all__ = ["CONSUMER_TABLE", "SEEDS", "TABLE", "Mode", "chosen", "consumer_modes", "http_modes",
           "matched", "told", "unreported"]

TABLE = Path(__file__).parent / "multiflaw.toml"
CONSUMER_TABLE = Path(__file__).parents[1] / "consumer_corpus" / "flaws.toml"
#: The seeds every mode is explored at (issue 37: every flaw reported at two seeds).  Under
#: CI only the first, and only the modes marked ``ci``: the suite's budget is 12 minutes.
SEEDS = (1, 2)


@dataclass(frozen=True)
class Mode:
    """A service (or consumer: its target file's stem) with ``flaws`` switched on at once,
    each with the properties of which one must be named by a failure of its own."""

    target: str
    flaws: Mapping[str, tuple[str, ...]] = field(hash=False)
    ci: bool = False
    #: The examples its exploration draws after the opening, where the test's default is
    #: not enough for a flaw no story of the opening shows.
    max_examples: int | None = None

    @property
    def name(self) -> str:
        return f"{self.target}[{'+'.join(self.flaws)}]"

    @property
    def start_args(self) -> list[str]:
        return [arg for flaw in self.flaws for arg in ("--flaw", flaw)]


def _modes(table: Path, section: str, field: str) -> tuple[Mode, ...]:
    data = tomllib.loads(table.read_text(encoding="utf-8"))
    return tuple(Mode(m[field], {f: tuple(p) for f, p in m["flaws"].items()}, m.get("ci", False),
                      m.get("max_examples")) for m in data[section])


def http_modes() -> tuple[Mode, ...]:
    return _modes(TABLE, "mode", "service")


def consumer_modes() -> tuple[Mode, ...]:
    return _modes(CONSUMER_TABLE, "combined", "consumer")


def chosen(modes: Iterable[Mode]) -> list[tuple[Mode, int]]:
    """The explorations a test run makes: every mode at every seed, or under CI the modes
    marked ``ci`` at the first seed."""
    if in_ci():
        return [(mode, SEEDS[0]) for mode in modes if mode.ci]
    return [(mode, seed) for mode in modes for seed in SEEDS]


def matched(flaws: Mapping[str, Collection[str]],
            failures: Sequence[Collection[str]]) -> dict[str, int]:
    """As many flaws as can be, each matched to a failure of its own (its index in
    ``failures``, each given as the properties its story names) naming one of the flaw's
    properties: a bipartite matching, by augmenting paths."""
    owner: dict[int, str] = {}

    def place(flaw: str, seen: set[int]) -> bool:
        for index, properties in enumerate(failures):
            if index in seen or not set(flaws[flaw]) & set(properties):
                continue
            seen.add(index)
            if index not in owner or place(owner[index], seen):
                owner[index] = flaw
                return True
        return False

    for flaw in flaws:
        place(flaw, set())
    return {flaw: index for index, flaw in owner.items()}


def unreported(mode: Mode, failures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The flaws of ``mode`` that no kept failure of their own reports (``failures`` as
    results.json's ``extra.explore.failures``)."""
    found = matched(mode.flaws, [f["properties"] for f in failures])
    return [flaw for flaw in mode.flaws if flaw not in found]


def told(failures: Sequence[Mapping[str, Any]]) -> str:
    """The kept failures in words, one a line: kinds, properties and story."""
    return "\n".join(f"  {', '.join(f['kinds'])} (properties {', '.join(f['properties'])}): "
                     f"{f.get('story')}" for f in failures) or "  none"

"""The other front ends' files a report directory may hold, read for the HTML page.

``matrix.json`` (``idem-harness matrix``), ``load.json`` (load runs) and ``story.json`` (the
explorer) each become one section of ``index.html`` when present.  A file that cannot be read
does not cost the page: it becomes a line saying what is wrong with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from harness._durations import format_duration

__all__ = [
    "FaultWindow",
    "LoadPoint",
    "LoadSection",
    "MatrixCellView",
    "MatrixRowView",
    "MatrixSection",
    "Sections",
    "StorySection",
    "StoryStep",
    "parse_load",
    "parse_matrix",
    "parse_story",
    "read_sections",
]


@dataclass(frozen=True, slots=True)
class MatrixCellView:
    verdict: str
    text: str
    reason: str | None = None
    properties: tuple[str, ...] = ()
    expected: bool = False  # a flaw caught here as a property it is known to break

    @property
    def mark(self) -> str:
        """The cell as a glance reads it: the properties found, or a sign."""
        if self.verdict == "fail":
            return " ".join(self.properties) or "✗"
        return {"pass": "✓", "unknown": "?"}.get(self.verdict, "\u2013")


@dataclass(frozen=True, slots=True)
class MatrixRowView:
    label: str
    kind: str
    expected: tuple[str, ...]
    cells: tuple[MatrixCellView, ...]
    problem: str | None
    href: str | None
    finished: bool = True  # False: a stop kept the row from some of its scenarios


@dataclass(frozen=True, slots=True)
class MatrixSection:
    scenarios: tuple[str, ...]
    rows: tuple[MatrixRowView, ...]
    problems: tuple[str, ...]
    stopped_by: str | None = None  # the signal that stopped the matrix before every row ended

    @property
    def title(self) -> str:
        """A flaw matrix trains; a matrix of targets compares implementations."""
        return "Flaw matrix" if any(r.kind == "flaw" for r in self.rows) else "Conformance matrix"


@dataclass(frozen=True, slots=True)
class LoadPoint:
    t: float
    requests_per_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float


@dataclass(frozen=True, slots=True)
class FaultWindow:
    start: float
    end: float
    fault: str


@dataclass(frozen=True, slots=True)
class LoadSection:
    figures: tuple[tuple[str, str], ...]
    timeline: tuple[LoadPoint, ...]
    fault_windows: tuple[FaultWindow, ...]
    #: How the run was set up (users, duration, chaos, seed...), so its figures can be read.
    settings: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class StoryStep:
    number: str
    kind: str
    text: str
    response: str
    effects: str


@dataclass(frozen=True, slots=True)
class StorySection:
    seed: str
    examples: str
    seconds: float | None
    property: str
    message: str
    target: str
    steps: tuple[StoryStep, ...]
    #: What each key ended with once every client had settled: (its name, its charges).
    charges: tuple[tuple[str, str], ...] = ()
    #: What makes it a failure of its own beside an exploration's others (``P9 stuck``...).
    kinds: tuple[str, ...] = ()
    #: The file it was read from (``story.json``, ``story-2.json``...).
    file: str = "story.json"


@dataclass(frozen=True)
class Sections:
    matrix: MatrixSection | None = None
    load: LoadSection | None = None
    #: Every story an exploration kept, in its order (``story.json``, ``story-2.json``...).
    stories: tuple[StorySection, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def story(self) -> StorySection | None:
        """The first story (the exploration's worst failure), if any."""
        return self.stories[0] if self.stories else None


def read_sections(directory: Path) -> Sections:
    """Every section whose file is in ``directory``; unreadable files are named in ``problems``."""
    readers: dict[str, Callable[[Any], object]] = {
        "matrix": lambda data: parse_matrix(data, directory),
        "load": parse_load,
    }
    found: dict[str, Any] = {}
    problems: list[str] = []

    def read(path: Path, parse: Callable[[Any], object]) -> object | None:
        try:
            return parse(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            problems.append(f"{path.name} could not be read ({type(exc).__name__}: {exc}); "
                            "run the command that wrote it again")
            return None

    for name, parse in readers.items():
        path = directory / f"{name}.json"
        if path.is_file():
            found[name] = read(path, parse)
    stories = []
    for path in _story_files(directory):
        story = read(path, parse_story)
        if isinstance(story, StorySection):
            stories.append(replace(story, file=path.name))
    return Sections(found.get("matrix"), found.get("load"), tuple(stories), tuple(problems))


def _story_files(directory: Path) -> list[Path]:
    """``story.json``, then ``story-2.json``, ``story-3.json``... as long as they go on."""
    files = []
    number = 1
    while (path := directory / ("story.json" if number == 1
                                else f"story-{number}.json")).is_file():
        files.append(path)
        number += 1
    return files


def _text(value: Any) -> str:
    """A JSON value as a person reads it: strings bare, numbers trimmed, the rest as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e6 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return json.dumps(value, sort_keys=True)


def _object(data: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise TypeError(f"{what} must be a JSON object, not {type(data).__name__}")
    return data


def parse_matrix(data: Any, directory: Path) -> MatrixSection:
    """``matrix.json`` as ``render_matrix_json`` writes it; rows link to their own reports."""
    matrix = _object(data, "matrix.json")
    scenarios = tuple(str(s) for s in matrix["scenarios"])
    problems = tuple(str(p) for p in matrix.get("problems", []))
    rows = []
    for row in matrix["rows"]:
        row = _object(row, "a matrix row")
        label = str(row["label"])
        expected = tuple(str(p) for p in row.get("expected", []))
        cells = _object(row.get("cells", {}), "a row's cells")
        views = []
        for scenario in scenarios:
            cell = _object(cells.get(scenario, {"verdict": "n/a", "text": "not run"}), "a cell")
            found = tuple(str(p) for p in cell.get("properties", []))
            views.append(MatrixCellView(str(cell.get("verdict", "unknown")),
                                        str(cell.get("text", cell.get("verdict", ""))),
                                        cell.get("reason"), found,
                                        bool(set(found) & set(expected))))
        problem = next((p for p in problems if p.startswith(f"{label}:")), None)
        href = (f"{quote(label)}/index.html" if (directory / label / "index.html").is_file()
                else None)
        rows.append(MatrixRowView(label, str(row.get("kind", "target")), expected,
                                  tuple(views), problem, href, bool(row.get("finished", True))))
    stopped_by = matrix.get("stopped_by")
    return MatrixSection(scenarios, tuple(rows), problems,
                         None if stopped_by is None else str(stopped_by))


def _flatten(figures: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Nested figures (``latency_ms.first.p50``) as one row each, in the file's order."""
    rows: list[tuple[str, str]] = []
    for name, value in figures.items():
        if isinstance(value, Mapping):
            rows += _flatten(value, f"{prefix}{name}.")
        elif name == "seconds" and isinstance(value, int | float):
            rows.append((f"{prefix}{name}", format_duration(float(value))))
        else:
            rows.append((f"{prefix}{name}", _text(value)))
    return rows


def _number(value: Any) -> float:
    """A timeline value; a second without completions has none, drawn as a gap."""
    return math.nan if value is None else float(value)


def parse_load(data: Any) -> LoadSection:
    """``load.json``: ``figures``, a ``timeline`` of points, the ``fault_windows`` and the
    ``settings`` (an option left unset is left out)."""
    load = _object(data, "load.json")
    figures = tuple(_flatten(_object(load.get("figures", {}), "figures")))
    timeline = tuple(
        LoadPoint(float(p["t"]), _number(p.get("requests_per_s", 0.0)), _number(p.get("p50_ms")),
                  _number(p.get("p95_ms")), _number(p.get("p99_ms")))
        for p in (_object(point, "a timeline point") for point in load.get("timeline", []))
    )
    windows = tuple(
        FaultWindow(float(w["start"]), float(w["end"]), str(w.get("fault", "fault")))
        for w in (_object(window, "a fault window") for window in load.get("fault_windows", []))
    )
    settings = tuple((name.replace("_", " "), _setting(name, value))
                     for name, value in _object(load.get("settings", {}), "settings").items()
                     if value is not None)
    return LoadSection(figures, tuple(sorted(timeline, key=lambda p: p.t)), windows, settings)


#: Load settings that are durations in seconds, shares of the charges, and rates.
_DURATIONS = frozenset({"duration", "request_timeout"})
_SHARES = frozenset({"double_submit", "reuse"})


def _setting(name: str, value: Any) -> str:
    """A load setting as a person reads it, and can paste back into the command: a seed as it
    was given (no thousands separators), durations and rates with their units."""
    if name == "seed":
        return str(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        if name in _DURATIONS:
            return format_duration(float(value))
        if name in _SHARES:
            return f"{value * 100:.4g}% of charges"
        if name == "spawn_rate":
            return f"{value:g} users/s"
    return _text(value)


def parse_story(data: Any) -> StorySection:
    """``story.json``: the explorer's shrunk story, step by step."""
    story = _object(data, "story.json")
    steps = tuple(
        StoryStep(_text(s.get("number", n)), _text(s.get("kind")), _text(s.get("text")),
                  _text(s.get("response")), _text(s.get("effects")))
        for n, s in enumerate((_object(step, "a story step") for step in story.get("steps", [])),
                              1)
    )
    seconds = story.get("seconds")
    return StorySection(
        seed=str(story.get("seed", "")),
        examples=_text(story.get("examples")),
        seconds=float(seconds) if isinstance(seconds, int | float) else None,
        property=_text(story.get("property")),
        message=_text(story.get("message")),
        target=_text(story.get("target")),
        steps=steps,
        charges=tuple((str(name), _text(count)) for name, count in
                      _object(story.get("charges", {}), "the story's charges").items()),
        kinds=tuple(_text(k) for k in story.get("kinds", [])),
    )

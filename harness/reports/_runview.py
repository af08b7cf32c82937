"""What the HTML page shows of a run, computed once.

The verdict, the scenarios-by-properties table, and each finding with its plain explanation and
its diagram.

A view model and nothing more: it reads the ``RunResult`` the checker produced and decides only
presentation (order, anchors, colours); the verdicts are the checker's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness._durations import format_duration
from harness._front import Front, front_for
from harness._outcomes import RunResult, ScenarioOutcome
from harness.diagrams._model import Diagram
from harness.diagrams._storyboard import Storyboard, sequence_diagram
from harness.judging._analysis import View, describe_identity
from harness.judging._checker import PROPERTIES
from harness.judging._findings import Finding, Klass, Note, klass_of
from harness.reports._explain import KLASS_MEANING, Explanation, explain, incident_of
from harness.reports._narrow import narrowed
from harness.reports._results import requests_sent, run_account, verdict_counts

__all__ = ["CARDS", "DIAGRAMS_PER_KIND", "LISTED", "Cell", "FindingView", "PropertyColumn",
           "PropertySummary", "RunView", "ScenarioRow", "by_key", "counterpart",
           "row_verdict", "run_view", "script_writer", "sharing_scripts"]


@dataclass(frozen=True, slots=True)
class PropertyColumn:
    id: str
    title: str
    klass: str


@dataclass(frozen=True, slots=True)
class Cell:
    """One scenario's verdict on one property; ``exercised`` when the scenario is about it."""

    verdict: str
    exercised: bool
    findings: int = 0
    anchor: str | None = None

    @property
    def css(self) -> str:
        if self.verdict == "pass" and not self.exercised:
            return "quiet"
        return self.verdict.replace("/", "")

    @property
    def text(self) -> str:
        if self.verdict == "fail":
            return f"✗ {self.findings}" if self.findings > 1 else "✗"
        if self.verdict == "pass":
            return "✓" if self.exercised else "·"
        return "?" if self.verdict == "unknown" else "\u2013"


@dataclass(frozen=True, slots=True)
class ScenarioRow:
    name: str
    verdict: str
    reason: str | None
    requests: int
    seconds: float
    cells: tuple[Cell, ...]
    anchor: str


#: Findings of one property in one scenario drawn in full; a load run can have thousands, and
#: nobody reads the thousandth diagram, so the rest are listed without one.
DIAGRAMS_PER_KIND = 10
#: Keys with findings shown as a card each; the next ``LISTED`` as a line each, and the rest
#: counted (results.json holds every one): a load run's page stays a page, not 128,000 px.
CARDS = 20
LISTED = 100


@dataclass(frozen=True, slots=True)
class FindingView:
    """One key's findings in one scenario, as one card (a finding without a key stands alone):
    the first, safety first, tells the headline and what the diagram highlights; each says
    what happened.  ``also``: the key's other findings, each with its property's title."""

    anchor: str
    scenario: str
    finding: Finding
    title: str
    plain: Explanation
    klass_meaning: str
    diagram: Diagram | None
    faults: tuple[tuple[str, str], ...]
    elided: bool = False
    script: str = ""  # the reproduction script's text, when the reproduction is a script
    also: tuple[tuple[Finding, str], ...] = ()
    narrow: Diagram | None = None  # the same diagram for a phone's screen


    @property
    def findings(self) -> tuple[Finding, ...]:
        return (self.finding, *(finding for finding, _ in self.also))

    @property
    def properties(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(f.property for f in self.findings))

    @property
    def klass(self) -> Klass:
        return "safety" if any(f.klass == "safety" for f in self.findings) else "conformance"


@dataclass(frozen=True, slots=True)
class PropertySummary:
    """One property's findings over the run: how many, on how many keys, in which scenarios."""

    column: PropertyColumn
    findings: int
    keys: int
    scenarios: tuple[str, ...]


@dataclass(frozen=True)
class RunView:
    target: str
    verdict: str
    seed: int
    started_at: str
    duration: str
    complete: bool
    counts: dict[str, int]
    properties: tuple[PropertyColumn, ...]
    rows: tuple[ScenarioRow, ...]
    findings: tuple[FindingView, ...]
    notes: tuple[tuple[str, Note], ...]
    prefix: str
    unfinished: tuple[str, ...] = ()
    #: A queue consumer's account (harness/consumer/_account.py): each scenario's, then the
    #: run's, as (label, account); empty for an HTTP service.
    accounts: tuple[tuple[str, dict[str, Any]], ...] = ()

    @property
    def each_finding(self) -> list[Finding]:
        return [f for card in self.findings for f in card.findings]

    @property
    def cards(self) -> tuple[FindingView, ...]:
        """The keys shown in full."""
        return self.findings[:CARDS]

    @property
    def listed(self) -> tuple[FindingView, ...]:
        """The keys after them, a line each."""
        return self.findings[CARDS:CARDS + LISTED]

    @property
    def left_out(self) -> int:
        """Keys with findings the page only counts (results.json has them)."""
        return max(0, len(self.findings) - CARDS - LISTED)

    @property
    def safety(self) -> int:
        return sum(1 for f in self.each_finding if f.klass == "safety")

    @property
    def conformance(self) -> int:
        return sum(1 for f in self.each_finding if f.klass == "conformance")

    @property
    def by_property(self) -> list[tuple[PropertyColumn, int]]:
        """Each property with findings, and how many, in id order."""
        found = Counter(f.property for f in self.each_finding)
        return [(p, found[p.id]) for p in self.properties if found[p.id]]

    @property
    def summary(self) -> list[PropertySummary]:
        """The findings by property and key, in id order."""
        summaries = []
        for column, count in self.by_property:
            cards = [card for card in self.findings if column.id in card.properties]
            scenarios = tuple(dict.fromkeys(card.scenario for card in cards))
            summaries.append(PropertySummary(column, count, len(cards), scenarios))
        return summaries

    @property
    def headline(self) -> str:
        found, keys = len(self.each_finding), len(self.findings)
        on = f" on {keys} key{'s' if keys != 1 else ''}" if keys != found else ""
        findings = (f"{found} finding{'s' if found != 1 else ''}{on}: {self.safety} safety, "
                    f"{self.conformance} conformance")
        if self.verdict == "pass":
            held = self.counts.get("pass", 0)
            return f"every property held in {held} scenario{'s' if held != 1 else ''}"
        if self.verdict == "incomplete":
            left = len(self.unfinished)
            return (f"the run stopped early: {left} scenario{'s' if left != 1 else ''} never "
                    f"ran ({', '.join(self.unfinished) or 'none'}); {findings} so far")
        if self.verdict == "inconclusive" and not self.counts.get("unknown", 0):
            return ("nothing was exercised: every scenario was not applicable to this target "
                    "(each says what it needs), so the run cannot pass")
        if self.verdict == "inconclusive":
            unknown = self.counts.get("unknown", 0)
            return (f"no finding, but {unknown} scenario{'s' if unknown != 1 else ''} could not "
                    "be judged: see each reason below")
        return findings


def row_verdict(result: RunResult | None, outcome: ScenarioOutcome) -> str:
    """The word a scenario's row shows.  A run's outcomes are scenarios that finished, but an
    exploration's one outcome (``extra["explore"]``) stands for the whole search, reported
    even when Ctrl-C stopped it: then its row says ``incomplete``, as the run does, never
    ``pass`` for a search that did not end (a finding stays a ``fail``).  Without the run
    (a scenario's line before any), the outcome's own."""
    if (result is not None and not result.complete and "explore" in result.extra
            and outcome.verdict == "pass"):
        return "incomplete"
    return outcome.verdict


def by_key(findings: Sequence[Finding]) -> list[list[Finding]]:
    """The findings grouped by key, safety first, in the order they came; a finding without a
    key is a group of its own."""
    ordered = sorted(findings, key=lambda f: f.klass != "safety")
    groups: dict[object, list[Finding]] = {}
    for number, finding in enumerate(ordered):
        groups.setdefault(finding.key if finding.key is not None else number, []).append(finding)
    return list(groups.values())


def run_view(result: RunResult, *, prefix: str = "") -> RunView:
    """The page's view of ``result``; ``prefix`` keeps anchors apart when a page shows two runs."""
    replay_marker = result.target.promises.replay_marker
    front = front_for(result.target)
    columns = tuple(PropertyColumn(pid, PROPERTIES[pid].title, klass_of(pid))
                    for pid in PROPERTIES.ids())
    titles = {column.id: column.title for column in columns}
    findings: list[FindingView] = []
    anchors: dict[tuple[str, str], str] = {}
    for outcome in result.outcomes:
        if not outcome.findings:
            continue
        board = Storyboard(outcome.events, replay_marker=replay_marker)
        write = script_writer(result, outcome)
        groups = sharing_scripts(outcome.findings)
        by_index = {e.index: e for e in outcome.events}
        drawn: Counter[str] = Counter()
        for group in by_key(outcome.findings):
            first = group[0]
            anchor = f"{prefix}finding-{len(findings) + 1}"
            for finding in group:
                anchors.setdefault((outcome.name, finding.property), anchor)
            drawn[first.property] += 1
            draw = drawn[first.property] <= DIAGRAMS_PER_KIND and len(findings) < CARDS
            cited = sorted({i for finding in group for i in finding.events})
            diagram = board.draw(cited, finding=first) if draw else None
            script = ""
            if first.reproduce in groups and draw:
                script = write(groups[first.reproduce])
            plain = explain(first.property, own=front.explanation(first.property),
                            incident=incident_of((by_index[i] for i in first.events
                                                  if i in by_index), front.incidents))
            also = tuple((f, titles.get(f.property, "")) for f in group[1:])
            findings.append(_finding_view(front, anchor, outcome.name, first,
                                          titles.get(first.property, ""), diagram, plain,
                                          elided=not draw, script=script, also=also))
    findings.sort(key=lambda f: f.klass != "safety")  # stable: scenario order stays
    rows = tuple(replace(_row(outcome, columns, anchors, prefix),
                         verdict=row_verdict(result, outcome)) for outcome in result.outcomes)
    return RunView(
        target=result.target.name,
        verdict=result.verdict,
        seed=result.seed,
        started_at=result.started_at.replace("T", " ").replace("+00:00", " UTC"),
        duration=format_duration(result.seconds),
        complete=result.complete,
        counts=verdict_counts(result.outcomes),
        properties=columns,
        rows=rows,
        findings=tuple(findings),
        notes=tuple((o.name, n) for o in result.outcomes for n in o.notes),
        prefix=prefix,
        unfinished=result.unfinished,
        accounts=_accounts(result),
    )


def _accounts(result: RunResult) -> tuple[tuple[str, dict[str, Any]], ...]:
    total = run_account(result)
    if total is None:
        return ()
    return (*((o.name, o.check.summary) for o in result.outcomes
              if o.check is not None and o.check.summary), ("whole run", total))


def _finding_view(front: Front, anchor: str, scenario: str, finding: Finding, title: str,
                  diagram: Diagram | None, plain: Explanation, *, elided: bool,
                  script: str, also: tuple[tuple[Finding, str], ...]) -> FindingView:
    faults = tuple((name, front.fault_summary(name))
                   for name in (diagram.faults if diagram else ()))
    view = FindingView(anchor, scenario, finding, title, plain, "", diagram, faults,
                       elided=elided, script=script, also=also,
                       narrow=narrowed(diagram) if diagram is not None else None)
    return replace(view, klass_meaning=KLASS_MEANING[view.klass])


def script_writer(result: RunResult,
                  outcome: ScenarioOutcome) -> Callable[[Sequence[Finding]], str]:
    """The writer of ``outcome``'s reproduction scripts, by the run's front end: given the
    findings that share one reproduction line (one key's), the script the report directory
    writes where that line says and the page shows."""
    return front_for(result.target).scripts(outcome, result.target, seed=result.seed)


def sharing_scripts(findings: Sequence[Finding]) -> dict[str, list[Finding]]:
    """The findings whose reproduction is a script, by that script's line."""
    groups: dict[str, list[Finding]] = {}
    for finding in findings:
        if finding.reproduce.endswith(".sh"):
            groups.setdefault(finding.reproduce, []).append(finding)
    return groups


def _row(outcome: ScenarioOutcome, columns: tuple[PropertyColumn, ...],
         anchors: dict[tuple[str, str], str], prefix: str) -> ScenarioRow:
    check = outcome.check
    found = Counter(f.property for f in outcome.findings)
    cells = []
    for column in columns:
        if outcome.verdict == "n/a" or check is None or column.id not in check.results:
            cells.append(Cell("n/a", column.id in outcome.properties))
            continue
        cells.append(Cell(check.results[column.id].verdict, column.id in outcome.properties,
                          found.get(column.id, 0), anchors.get((outcome.name, column.id))))
    return ScenarioRow(outcome.name, outcome.verdict, outcome.reason, requests_sent(outcome),
                       outcome.seconds, tuple(cells), f"{prefix}scenario-{outcome.name}")


def counterpart(flawed: RunResult, fixed: RunResult) -> Diagram | None:
    """The fixed run's story of the key behind the flawed run's first finding.

    Both runs played the same scenario with the same seed, so the n-th key of one is the n-th
    key of the other: the diagram shows what the correct server did where the flawed one failed.
    """
    for outcome in flawed.outcomes:
        other = next((o for o in fixed.outcomes if o.name == outcome.name), None)
        if not outcome.findings or other is None:
            continue
        keyed = [describe_identity(i) for i, _ in View(outcome.events).keyed()]
        for finding in outcome.findings:
            if finding.key not in keyed:
                continue
            view = View(other.events)
            identities = view.keyed()
            position = keyed.index(finding.key)
            if position >= len(identities):
                return None
            identity, attempts = identities[position]
            seen = view.effects.get(identity)
            cited = view.evidence(attempts, *([seen.index] if seen else []))
            return sequence_diagram(other.events, cited,
                                    replay_marker=fixed.target.promises.replay_marker)
    return None

"""The front ends: everything the engine asks of one kind of target, and which kind a target is.

The engine drives, records, judges and reports the same way whatever the target is; what
differs between an HTTP service and a queue consumer is what a ``Front`` says: how its target
file is told apart and validated, how it is deployed and a scenario's context made, how a run
plays its scenarios, the properties its histories are judged by, a finding's reproduction
script and sequence diagram, the account its runs add up, the words its explanations use where
they differ, and the explorer's part (``Explorer``: the state machine, the sessions, the
actions a story is made of).

Each front end is one package (``harness/http/``, ``harness/consumer/``) whose ``_front.py``
holds its ``Front``.  ``FRONTS`` maps a kind to that module, imported the first time the kind
is asked for, so the engine stays cheap to import (every pytest run imports ``harness``,
through the plugin) and never names a front end's modules in an import: adding a front end
touches ``FRONTS`` alone.  A front end imports the engine, never another front end.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import random

    from hypothesis.stateful import RuleBasedStateMachine

    from harness._history import Event, History
    from harness._outcomes import Handler, RunResult, ScenarioOutcome
    from harness._runner import RunConfig
    from harness._scenario import Scenario
    from harness._target import ReplayMarker, Target
    from harness.diagrams._model import Diagram
    from harness.explore._story_session import StorySession
    from harness.judging._checker import Registry
    from harness.judging._findings import Finding
    from harness.reports._explain import Explanation
    from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["DEFAULT_KIND", "FRONTS", "WHOLE", "Explorer", "Front", "Layout", "SessionOptions",
           "front_for", "front_named", "front_of_file", "front_of_history", "fronts", "kind_of"]

#: Every front end by the kind of target it drives: the module holding its ``FRONT``.
FRONTS: dict[str, str] = {
    "http": "harness.http._front",
    "consumer": "harness.consumer._front",
}
#: The kind of a target file that names none, and of a history no other front end claims.
DEFAULT_KIND = "http"

#: A front end's layout of a finding's events: the events cited, and the finding highlighted.
Layout = Callable[[list["Event"], "Finding | None"], "Diagram"]


class SessionOptions(Protocol):
    """What an explorer's session is made with besides its deployment (an exploration's or a
    replay's config)."""

    @property
    def retry_horizon(self) -> float: ...

    @property
    def trust_moved_clock(self) -> bool: ...


#: An exploration in one part (``Explorer.parts``).
WHOLE = "whole"


class Explorer(Protocol):
    """A front end as the explorer drives it (``harness/explore/``).  Drawing, judging after
    every step, shrinking, dropping steps, the story, its replay and the report are the
    engine's; what differs is how the one deployment an exploration shares is started, how a
    session starts each example's world on it and what it measures first, the state machine
    Hypothesis runs, what was sent, and how the examples' tallies add up."""

    @property
    def name(self) -> str:
        """What a story drawn by this front end says it is (``Story.front``): its kind."""

    @property
    def machine(self) -> str:
        """The state machine's name, as a story prints it (``state = IdempotencyMachine()``)."""

    def problems_with(self, actions: Sequence[Any], target: Target) -> list[str]:
        """Everything that keeps ``actions`` from running, in this order, against ``target``."""

    def races(self, actions: Sequence[Any]) -> bool:
        """Does a story's outcome depend on how things running at once meet?"""

    def in_order(self, actions: Sequence[Any]) -> list[Any]:
        """The story with what it times against each other sent in order, each once the one
        before it was answered: another telling of the same story, for a replay whose drawn
        telling met the other way (the same actions where there is no such thing)."""

    def deployed(self, target: Target, *, command: str, started_at: str,
                 report_dir: Path | None, allow_remote: bool,
                 toxiproxy: ToxiproxyServer | None) -> AbstractContextManager[Any]:
        """The deployment every example of an exploration (or a replay) shares."""

    def session(self, deployment: Any, options: SessionOptions, *,
                listener: Callable[[Event], None] | None = None,
                progress: Callable[[str, int], None] | None = None,
                phase: str = "drawing", confirm: bool = True) -> StorySession[Any, Any]:
        """A session on ``deployment``."""

    def prepare(self, session: StorySession[Any, Any]) -> None:
        """Measure what the machine draws from, once per exploration."""

    def parts(self, session: StorySession[Any, Any]) -> tuple[str, ...]:
        """The parts an exploration of the session's target is split into, each explored on a
        deployment of its own with its share of the budget, in this order: ``(WHOLE,)`` for
        one whole; more where two kinds of step cannot share one deployment (a clock jump and a
        restart that leaves the clock unknown)."""

    def machine_for(self, session: StorySession[Any, Any],
                    part: str = WHOLE) -> type[RuleBasedStateMachine]:
        """The state machine for the session's target, drawing what ``part`` draws."""

    def alone(self, target: Target) -> str | None:
        """Why ``target`` cannot be explored by several searches at once, each on an instance
        of its own (None: it can)."""

    def sent(self, events: Sequence[Event]) -> dict[str, int]:
        """What the examples sent, by name (``requests``; ``publishes``)."""

    def tally(self, summaries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
        """The examples' tallies (``CheckResult.summary``) as one, or None."""


class Front(Protocol):
    """One kind of target, as the engine drives, judges and reports it."""

    # ---- what it is ------------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """Its kind: what a target's ``kind``, ``CheckOptions.kind`` and a story's ``front``
        say (``http``, ``consumer``)."""

    @property
    def described(self) -> str:
        """The kind in a sentence's words: ``an HTTP service``, ``a queue consumer``."""

    @property
    def choosing(self) -> str:
        """How a target file says it is of this kind, as a fix says it
        (``leave kind out for an HTTP service``)."""

    # ---- its target file -------------------------------------------------------------------

    def claims(self, data: Mapping[str, Any]) -> bool:
        """Does a target file's parsed TOML describe a target of this kind?  Asked of every
        front end but the default one, which takes what no other claims."""

    def model(self) -> type[Target]:
        """The model a target file of this kind is validated with."""

    def fits(self, scenario: Scenario) -> bool:
        """Is ``scenario`` of the catalog one this kind of target plays?  (Another kind's is
        n/a against it, with the reason.)"""

    # ---- a run -----------------------------------------------------------------------------

    def deploy(self, target: Target, *, toxiproxy: ToxiproxyServer, workdir: Path,
               allow_remote: bool, instances: int = 1) -> AbstractContextManager[Any]:
        """The target started or found, behind Toxiproxy, with its oracle and hooks: what a
        scenario's context acts on."""

    def context(self, scenario: Scenario, deployment: Any, history: History,
                rng: random.Random) -> Any:
        """The context ``scenario`` drives on ``deployment``, recording into ``history``."""

    def run(self, config: RunConfig, handlers: Sequence[Handler] = ()) -> RunResult:
        """Deploy ``config.target``, play the scenarios, judge each history (``judge``) and
        tell the handlers, as ``harness._runner.run_scenarios`` promises."""

    def matrix_services(self) -> AbstractContextManager[object]:
        """What the matrix's rows of this kind share while it runs (a consumer's broker)."""

    # ---- judging and reporting -------------------------------------------------------------

    def properties(self) -> Registry:
        """The properties a history of this kind is judged by."""

    def reproduce_line(self, finding: Finding, by_index: Mapping[int, Event], target: Target,
                       base_url: str) -> str | None:
        """How to reproduce ``finding`` by hand while the target still runs (an HTTP
        service's: the ``curl`` of its last request); None when there is no such line."""

    def scripts(self, outcome: ScenarioOutcome, target: Target, *,
                seed: int) -> Callable[[Sequence[Finding]], str]:
        """The writer of ``outcome``'s reproduction scripts: given the findings that share one
        (one key's), the bash script that plays them again after the run."""

    def owns_history(self, events: Sequence[Event]) -> bool:
        """Is ``events`` a history of this kind (the diagrams are laid out by its front end)?
        Asked of every front end but the default one."""

    def layout(self, events: Sequence[Event], *,
               replay_marker: ReplayMarker | None = None) -> Layout:
        """How a finding's events of one scenario's history are laid out as a diagram."""

    def fault_summary(self, fault: str) -> str:
        """What a fault a diagram names does, in the page's words ("" when none is said)."""

    def add_accounts(self, summaries: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
        """The scenarios' tallies added up into the run's account (results.json's and the
        page's ``queue_account``), or None when this kind keeps none."""

    def explanation(self, property_id: str) -> Explanation | None:
        """A property in this kind's own words, where they differ from the engine's."""

    @property
    def incidents(self) -> Mapping[str, str]:
        """What a fault of this kind did, as the start of a crash-safety headline."""

    @property
    def explored_by_the_gate(self) -> bool:
        """Does the pytest gate add an explorer test for a target of this kind?"""

    # ---- the explorer ----------------------------------------------------------------------

    def story_actions(self) -> Any:
        """The type a saved story's actions are read with (a pydantic union)."""

    def explorer(self) -> Explorer:
        """The explorer's part of this front end."""


_loaded: dict[str, Front] = {}


def front_named(kind: str) -> Front:
    """The front end of ``kind`` (a ``KeyError`` for a kind no front end drives)."""
    front = _loaded.get(kind)
    if front is None:
        front = importlib.import_module(FRONTS[kind]).FRONT
        _loaded[kind] = front
    return front


def fronts() -> list[Front]:
    """Every front end, the default one first."""
    return [front_named(kind) for kind in sorted(FRONTS, key=lambda k: k != DEFAULT_KIND)]


def kind_of(target: Target) -> str:
    """The kind of ``target`` (a target model with no ``kind`` is the default kind's)."""
    return str(getattr(target, "kind", DEFAULT_KIND))


def front_for(target: Target) -> Front:
    """The front end that drives ``target``."""
    return front_named(kind_of(target))


def front_of_file(data: Mapping[str, Any]) -> Front:
    """The front end whose kind a target file's parsed TOML describes: the first other than the
    default one that claims it, else the default one."""
    others = [front for front in fronts() if front.kind != DEFAULT_KIND]
    return next((front for front in others if front.claims(data)), front_named(DEFAULT_KIND))


def front_of_history(events: Sequence[Event]) -> Front:
    """The front end whose history ``events`` is: the first other than the default one that
    owns it, else the default one."""
    others = [front for front in fronts() if front.kind != DEFAULT_KIND]
    return next((front for front in others if front.owns_history(events)),
                front_named(DEFAULT_KIND))

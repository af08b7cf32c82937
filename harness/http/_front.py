"""The HTTP front end as the engine sees it: ``FRONT``, a ``harness._front.Front``.

An HTTP service's target file is the default kind (it names no ``kind``).  Each method imports
what it needs when first called: the registry imports this module to tell target files apart,
and that must not load the deployment, the client, the explorer or the reports.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness._scenario import Scenario
from harness._target import ReplayMarker, Target

if TYPE_CHECKING:
    from harness._front import Explorer, Layout
    from harness._history import Event, History
    from harness._outcomes import Handler, RunResult, ScenarioOutcome
    from harness._runner import RunConfig
    from harness.judging._checker import Registry
    from harness.judging._findings import Finding
    from harness.reports._explain import Explanation
    from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["FRONT", "HttpFront"]


class HttpFront:
    """An HTTP service behind Toxiproxy: requests through the recording client, network faults,
    kills and restarts, clock moves, its store's writes struck."""

    kind = "http"
    described = "an HTTP service"
    choosing = "leave kind out for an HTTP service"
    incidents: Mapping[str, str] = {}
    explored_by_the_gate = True

    def claims(self, data: Mapping[str, Any]) -> bool:
        """A file that names no kind; the registry asks every other front end first."""
        return data.get("kind") is None

    def model(self) -> type[Target]:
        return Target

    def fits(self, scenario: Scenario) -> bool:
        return scenario.kind == self.kind

    def deploy(self, target: Target, *, toxiproxy: ToxiproxyServer, workdir: Path,
               allow_remote: bool, instances: int = 1) -> AbstractContextManager[Any]:
        from harness.http._deployment import Deployment

        return Deployment(target, toxiproxy=toxiproxy, workdir=workdir, instances=instances,
                          allow_remote=allow_remote)

    def context(self, scenario: Scenario, deployment: Any, history: History,
                rng: random.Random) -> Any:
        from harness.http._context import ScenarioContext

        return ScenarioContext(scenario=scenario, deployment=deployment, history=history,
                               rng=rng)

    def run(self, config: RunConfig, handlers: Sequence[Handler] = ()) -> RunResult:
        from harness.http._runner import run_http_scenarios

        return run_http_scenarios(config, handlers)

    def matrix_services(self) -> AbstractContextManager[object]:
        """Nothing: each row starts its own target behind the matrix's Toxiproxy."""
        return nullcontext()

    def properties(self) -> Registry:
        from harness.judging._checker import PROPERTIES

        return PROPERTIES

    def reproduce_line(self, finding: Finding, by_index: Mapping[int, Event], target: Target,
                       base_url: str) -> str | None:
        """The ``curl`` of the finding's last request, which works while the target runs."""
        from harness.http.reproduction._scripts import curl_for

        invokes = [by_index[i] for i in finding.events
                   if i in by_index and by_index[i].f == "request"
                   and by_index[i].type == "invoke"]
        return curl_for(invokes[-1], target, base_url) if invokes else None

    def scripts(self, outcome: ScenarioOutcome, target: Target, *,
                seed: int) -> Callable[[Sequence[Finding]], str]:
        """Each key's story replayed through the harness (``reproduction/``); the history is
        indexed once, for the first script, and shared by the others."""
        from harness.http.reproduction._reproduction import EventIndex, reproduction_for
        from harness.http.reproduction._scripts import script_for

        indexed: list[EventIndex] = []

        def write(findings: Sequence[Finding]) -> str:
            if not indexed:
                indexed.append(EventIndex(outcome.events))
            reproduction = reproduction_for(findings, indexed[0], target,
                                            scenario=outcome.name, seed=seed)
            klass = "safety" if any(f.klass == "safety" for f in findings) else "conformance"
            return script_for(reproduction, target, klass=klass)

        return write

    def owns_history(self, events: Sequence[Event]) -> bool:
        """Every history no other front end owns."""
        return True

    def layout(self, events: Sequence[Event], *,
               replay_marker: ReplayMarker | None = None) -> Layout:
        from harness.http._diagram import HttpBoard

        return HttpBoard(events, replay_marker=replay_marker).diagram

    def fault_summary(self, fault: str) -> str:
        from harness.http._nemesis import FAULTS

        return FAULTS[fault].summary if fault in FAULTS else ""

    def add_accounts(self, summaries: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
        """None: an HTTP run keeps no account beside its verdicts."""
        return None

    def explanation(self, property_id: str) -> Explanation | None:
        """None: the engine's words are an HTTP service's."""
        return None

    def story_actions(self) -> Any:
        from harness.http.explore._actions import Action

        return Action

    def explorer(self) -> Explorer:
        from harness.http.explore._front import HTTP

        return HTTP


FRONT = HttpFront()

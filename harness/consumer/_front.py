"""The queue consumer's front end as the engine sees it: ``FRONT``, a ``harness._front.Front``.

A consumer's target file says ``kind = "consumer"`` (or has a ``[queue]`` or a ``[topic]``); its
run publishes through a real broker (RabbitMQ or Kafka: which one, only the broker adapters
know) and judges with ``QUEUE_PROPERTIES``; its findings are reproduced by playing their
scenario again, drawn with a producer, a broker and the consumers, and added up into the queue
account.  The explorer's part (``explore/``) is imported when first asked for.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness._scenario import Scenario
from harness._target import ReplayMarker, Target
from harness.consumer._account import add_accounts
from harness.consumer._context import ConsumerContext
from harness.consumer._diagram import consumer_diagram
from harness.consumer._properties import QUEUE_PROPERTIES
from harness.consumer._reproduce import consumer_script
from harness.consumer._runner import deployed, run_consumer_scenarios, shared_broker
from harness.consumer._target import ConsumerTarget, is_consumer

if TYPE_CHECKING:
    from harness._front import Explorer, Layout
    from harness._history import Event, History
    from harness._outcomes import Handler, RunResult, ScenarioOutcome
    from harness._runner import RunConfig
    from harness.judging._checker import Registry
    from harness.judging._findings import Finding
    from harness.reports._explain import Explanation
    from harness.services._toxiproxy import ToxiproxyServer

__all__ = ["FRONT", "ConsumerFront"]

#: A queue consumer's P9, headline and meaning: what a consumer lives through is not only a
#: crash.
_P9 = (
    "A crash or a lost connection left the key broken",
    "After the consumer is killed, or its broker connection is cut or stalls, the messages it "
    "had not acked come back: their redeliveries must converge to exactly one effect, and no "
    "key may stay claimed past the promised lease. Before the lease has run out a claimed key "
    "is not stuck: the verdict is unknown until the harness has waited for it.")


class ConsumerFront:
    """A queue consumer on a real broker (RabbitMQ or Kafka, an adapter behind the broker port
    of ``_broker.py``), its broker connections behind Toxiproxy."""

    kind = "consumer"
    described = "a queue consumer"
    choosing = 'write kind = "consumer" for a queue consumer'
    #: What a consumer's fault did, as the start of a P9 headline.
    incidents: Mapping[str, str] = {
        "connection-stall": "A stalled broker connection",
        "connection-cut": "A cut broker connection",
        "ack-held": "A held ack and a cut connection",
    }
    #: The pytest gate adds no explorer test for a consumer (each would start a broker).
    explored_by_the_gate = False

    def claims(self, data: Mapping[str, Any]) -> bool:
        return is_consumer(data)

    def model(self) -> type[Target]:
        return ConsumerTarget

    def fits(self, scenario: Scenario) -> bool:
        return scenario.kind == self.kind

    def deploy(self, target: Target, *, toxiproxy: ToxiproxyServer, workdir: Path,
               allow_remote: bool, instances: int = 1) -> AbstractContextManager[Any]:
        """The broker (the target's own, the matrix's shared one or a throwaway node) and the
        consumers the file describes (``instances`` is the file's to say)."""
        assert isinstance(target, ConsumerTarget)
        return deployed(target, toxiproxy=toxiproxy, workdir=workdir, allow_remote=allow_remote)

    def context(self, scenario: Scenario, deployment: Any, history: History,
                rng: random.Random) -> Any:
        return ConsumerContext(scenario_name=scenario.name, deployment=deployment,
                               history=history, rng=rng)

    def run(self, config: RunConfig, handlers: Sequence[Handler] = ()) -> RunResult:
        return run_consumer_scenarios(config, handlers)

    def matrix_services(self) -> AbstractContextManager[object]:
        """One broker of each kind for every consumer row (a demo's two runs too), started
        when a row first needs it: a broker takes seconds to start."""
        return shared_broker()

    def properties(self) -> Registry:
        return QUEUE_PROPERTIES

    def reproduce_line(self, finding: Finding, by_index: Mapping[int, Event], target: Target,
                       base_url: str) -> str | None:
        """None: a consumer's finding needs the harness to publish and fault (its script)."""
        return None

    def scripts(self, outcome: ScenarioOutcome, target: Target, *,
                seed: int) -> Callable[[Sequence[Finding]], str]:
        """The scenario played again with the run's seed, judged for the first finding."""
        assert isinstance(target, ConsumerTarget)

        def write(findings: Sequence[Finding]) -> str:
            return consumer_script(findings[0], outcome.events, target, scenario=outcome.name,
                                   seed=seed)

        return write

    def owns_history(self, events: Sequence[Event]) -> bool:
        """A history that publishes."""
        return any(e.f == "publish" for e in events)

    def layout(self, events: Sequence[Event], *,
               replay_marker: ReplayMarker | None = None) -> Layout:
        return consumer_diagram

    def fault_summary(self, fault: str) -> str:
        """None said: a consumer's diagram names its faults without a summary, as it did
        before the front ends were told apart (``CONSUMER_FAULTS`` has one for each)."""
        return ""

    def add_accounts(self, summaries: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
        return add_accounts(summaries)

    def explanation(self, property_id: str) -> Explanation | None:
        from harness.reports._explain import Explanation  # the reports load on first use

        return Explanation(*_P9) if property_id == "P9" else None

    def story_actions(self) -> Any:
        from harness.consumer.explore._actions import ConsumerAction

        return ConsumerAction

    def explorer(self) -> Explorer:
        from harness.consumer.explore._front import CONSUMER

        return CONSUMER


FRONT = ConsumerFront()

"""What the pytest plugin (``harness.pytest_plugin``) is made of.

The shared run per target, the test items (a scenario each, and the explorer), and the shortest
story printed for a finding."""

from harness._gate._exploring import ExploreFailed, ExploreItem
from harness._gate._items import ScenarioFailed, ScenarioItem, TargetCollector, scenario_marker
from harness._gate._runs import RunFailed, TargetRun
from harness._gate._story import render_story

__all__ = [
    "ExploreFailed",
    "ExploreItem",
    "RunFailed",
    "ScenarioFailed",
    "ScenarioItem",
    "TargetCollector",
    "TargetRun",
    "render_story",
    "scenario_marker",
]

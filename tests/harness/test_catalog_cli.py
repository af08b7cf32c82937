"""``idem-harness scenarios`` and ``explain``: the catalog as a trainer reads it."""

from __future__ import annotations

from click.testing import CliRunner

from harness.cli import main
from scenarios import CATALOG


def test_scenarios_lists_every_story_with_its_properties() -> None:
    result = CliRunner().invoke(main, ["scenarios"])
    assert result.exit_code == 0
    for name, scenario in CATALOG.items():
        line = next(line for line in result.output.splitlines() if line.startswith(name + " "))
        assert scenario.summary in line and " ".join(scenario.properties) in line


def test_explain_prints_story_plan_and_property_meanings() -> None:
    result = CliRunner().invoke(main, ["explain", "crash-mid-request"])
    assert result.exit_code == 0
    assert "out-of-memory kill" in result.output
    assert "Plan:" in result.output and "Needs from the target: crash" in result.output
    assert "P9   (safety) crash safety" in result.output


def test_explain_an_unknown_scenario_lists_the_known_ones() -> None:
    result = CliRunner().invoke(main, ["explain", "time-travel"])
    assert result.exit_code == 2
    assert "known scenarios: timeout-after-commit" in result.output


def test_every_scenario_names_only_design_properties_and_known_needs() -> None:
    from harness import PROPERTIES
    from harness._scenario import CAPABILITY_HINTS
    from harness.consumer._scenario import CONSUMER_CAPABILITY_HINTS, ConsumerScenario

    for scenario in CATALOG.values():
        consumer = isinstance(scenario, ConsumerScenario)
        hints = CONSUMER_CAPABILITY_HINTS if consumer else CAPABILITY_HINTS
        assert set(scenario.properties) <= set(PROPERTIES.ids()), scenario.name
        assert scenario.needs <= set(hints), scenario.name
        assert scenario.story and scenario.plan and scenario.summary

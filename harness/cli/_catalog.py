"""``idem-harness scenarios`` and ``idem-harness explain``: the catalog, for people."""

from __future__ import annotations

import textwrap

import click

from harness._front import front_named
from harness.cli._common import translate_errors
from harness.judging._findings import klass_of

__all__ = ["explain", "list_scenarios"]


@click.command("scenarios")
def list_scenarios() -> None:
    """List the scenarios with their one-line story."""
    from scenarios import CATALOG

    width = max(len(name) for name in CATALOG)
    for scenario in CATALOG.values():
        click.echo(f"{scenario.name:<{width}}  {scenario.summary}  "
                   f"[{' '.join(scenario.properties)}]")


@click.command()
@click.argument("name")
@translate_errors
def explain(name: str) -> None:
    """Print a scenario's story, its plan and what each property it checks means."""
    from scenarios import get_scenario

    scenario = get_scenario(name)
    click.secho(scenario.name, bold=True)
    click.echo(textwrap.fill(scenario.story, width=88))
    click.echo("\nPlan:")
    for step in scenario.plan:
        click.echo(f"  - {step}")
    if scenario.needs:
        click.echo(f"\nNeeds from the target: {', '.join(sorted(scenario.needs))}")
    click.echo("\nProperties:")
    registry = front_named(scenario.kind).properties()
    for property_id in scenario.properties:
        spec = registry[property_id]
        click.echo(f"  {property_id:<4} ({klass_of(property_id)}) {spec.title}")

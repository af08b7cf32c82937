"""The gate's part of a pytest session: its runs, their items and the scenarios selected.

The runs the options ask for, their items collected before selection, and the scenarios that
survived it.  ``harness.pytest_plugin`` imports this only when a session asks for the gate, so
other pytest runs do not pay for loading the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness._errors import HarnessError
from harness._front import front_for
from harness._gate._exploring import ExploreItem
from harness._gate._items import ScenarioItem, TargetCollector, scenario_marker
from harness._gate._runs import TargetRun
from harness._profiles import get_profile
from harness._target import Target
from harness.targets._loader import load_target
from scenarios import CATALOG

__all__ = ["collect", "idle", "keep_chosen", "mark_selected", "runs_for", "scenario_markers"]


def scenario_markers() -> list[str]:
    """One marker per scenario of the catalog: ``-m idem_key_reuse``."""
    return [f"{scenario_marker(s.name)}: idem-harness scenario {s.name}: {s.summary}"
            for s in CATALOG.values()]


def runs_for(config: pytest.Config, files: list[str]) -> list[TargetRun]:
    """One run per target file (and the reference server with ``--idem-reference``)."""
    try:
        profile = get_profile(config.getoption("idem_profile"))
        targets = [load_target(f) for f in files]
    except HarnessError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if config.getoption("idem_reference"):
        targets.append(load_target("reference"))
    if config.getoption("idem_reference_consumer"):
        from harness.consumer._reference import reference_consumer_target

        targets.append(reference_consumer_target(store=None, flaw=None))
    _refuse_duplicates(targets)
    report_dir = Path(config.getoption("idem_report_dir"))
    examples = config.getoption("idem_explore_examples")
    return [
        TargetRun(target, report_dir / target.name, profile, config.getoption("idem_seed"),
                  0 if not front_for(target).explored_by_the_gate
                  else profile.explore_max_examples if examples is None else max(examples, 0))
        for target in targets
    ]


def _refuse_duplicates(targets: list[Target]) -> None:
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise pytest.UsageError(f"idem-harness: two targets share a name ({', '.join(names)}); "
                                "each needs its own report directory: change `name` in one")


def collect(session: pytest.Session, runs: list[TargetRun], items: list[pytest.Item]) -> None:
    """Each run's items, through the ordinary collection hooks, so reports count them and show
    collection errors."""
    for run in runs:
        name = f"idem-harness[{run.target.name}]"
        collector = TargetCollector.from_parent(
            session, name=name, nodeid=name, run=run,
            path=Path(run.target.source) if run.target.source else session.path,
        )
        report = collector.ihook.pytest_make_collect_report(collector=collector)
        collector.ihook.pytest_collectreport(report=report)
        items.extend(node for node in report.result if isinstance(node, pytest.Item))


def keep_chosen(config: pytest.Config, chosen: list[str], items: list[pytest.Item]) -> None:
    """With gate test ids among the arguments, keep only the items they name (an id of a
    collector, ``idem-harness[name]``, names all of its items), as pytest does for paths."""
    if not chosen:
        return
    unknown = [c for c in chosen if not any(_named(item.nodeid, c) for item in items)]
    if unknown:
        raise pytest.UsageError(f"idem-harness: no test {', '.join(unknown)}; list them with "
                                "--collect-only -q")
    kept = [item for item in items if any(_named(item.nodeid, c) for c in chosen)]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def _named(nodeid: str, chosen: str) -> bool:
    return nodeid == chosen or nodeid.startswith(chosen + "::")


def mark_selected(session: pytest.Session) -> None:
    """Each run plays only the scenarios whose items survived selection, and counts its
    items that did (the explorer's too)."""
    for item in session.items:
        if isinstance(item, ScenarioItem):
            item.run.selected.append(item.scenario.name)
        if isinstance(item, ScenarioItem | ExploreItem):
            item.run.items += 1


def idle(runs: list[TargetRun]) -> list[str]:
    """Why each run that had items left exercised nothing: every item it kept was skipped as
    not applicable to its target.  pytest passes a session whose tests all skipped; a gate
    must not pass on nothing (a run of the CLI that plays only n/a scenarios is inconclusive
    for the same reason).  A run that could not start (a missing service, skipped outside
    CI) is not idle: its skips say why."""
    return [f"idem-harness: target {run.target.name} exercised nothing: each of its "
            f"{run.items} selected test(s) does not apply to it (skipped); a gate does not "
            "pass on nothing: select a scenario the target supports (-m, -k), or give its "
            "file the hooks the skip reasons name"
            for run in runs if run.items and not run.exercised and run.error is None]

"""idem-harness as a pytest plugin: the CI gate inside a team's existing pytest run.

``pytest --idem-target payments.toml`` adds one test per scenario of the catalog and one for the
explorer (within the profile's budget of examples), and ``--idem-reference`` the same for the
built-in reference server.  The options choose a profile
(``--idem-profile``, else ``IDEM_PROFILE``, else ``ci`` when ``CI=true``, else ``dev``), and the
tests call the same runner as ``idem-harness run``, writing the same report directory.  It is
registered through the ``pytest11`` entry point; without ``--idem-target`` or
``--idem-reference`` it adds no test and changes nothing in a session.  docs/ci.md shows it in
a CI workflow.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness._errors import HarnessError
from harness._gate import ScenarioItem, TargetCollector, TargetRun, scenario_marker
from harness._profiles import get_profile
from harness._target import Target, load_target
from scenarios import CATALOG

RUNS = pytest.StashKey[list[TargetRun]]()

MARKERS = [
    "idem: a test added by idem-harness (-m idem selects them all, -m 'not idem' none)",
    "idem_target(name): the target file's name the test runs against",
    "idem_scenario(name): the scenario the test plays, "
    "e.g. -m \"idem_scenario(name='key-reuse')\"",
    "idem_property(id): a property the scenario exercises, e.g. -m \"idem_property(id='P1')\"",
    "idem_explore: the explorer's test (Hypothesis stories within a budget of examples)",
    *(f"{scenario_marker(s.name)}: idem-harness scenario {s.name}: {s.summary}"
      for s in CATALOG.values()),
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("idem-harness", "idempotency-key conformance gate (idem-harness)")
    group.addoption("--idem-target", action="append", default=[], metavar="FILE",
                    help="target file (TOML) to verify, one test per scenario (repeatable)")
    group.addoption("--idem-reference", action="store_true",
                    help="verify the built-in reference server too")
    group.addoption("--idem-profile", metavar="NAME", default=None,
                    help="dev, ci or train (default: IDEM_PROFILE, else ci when CI=true, "
                         "else dev); ci turns a missing service into a failure")
    group.addoption("--idem-report-dir", metavar="DIR", default="reports/pytest",
                    help="each target writes results.json, junit.xml and history.jsonl to "
                         "DIR/<target name> (default: reports/pytest)")
    group.addoption("--idem-seed", type=int, default=None, metavar="N",
                    help="seed for the harness's own choices (default: a fresh one, reported)")
    group.addoption("--idem-explore-examples", type=int, default=None, metavar="N",
                    help="the explorer test's budget of Hypothesis examples per target "
                         "(default: the profile's, 30 under ci; 0: no explorer test)")


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    files: list[str] = config.getoption("idem_target")
    if not files and not config.getoption("idem_reference"):
        return
    try:
        profile = get_profile(config.getoption("idem_profile"))
        targets = [load_target(f) for f in files]
    except HarnessError as exc:
        raise pytest.UsageError(str(exc)) from exc
    if config.getoption("idem_reference"):
        targets.append(load_target("reference"))
    _refuse_duplicates(targets)
    report_dir = Path(config.getoption("idem_report_dir"))
    examples = config.getoption("idem_explore_examples")
    config.stash[RUNS] = [
        TargetRun(target, report_dir / target.name, profile, config.getoption("idem_seed"),
                  profile.explore_max_examples if examples is None else max(examples, 0))
        for target in targets
    ]


def _refuse_duplicates(targets: list[Target]) -> None:
    names = [t.name for t in targets]
    if len(set(names)) != len(names):
        raise pytest.UsageError(f"idem-harness: two targets share a name ({', '.join(names)}); "
                                "each needs its own report directory: change `name` in one")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Collect the harness's items before ``-m`` and ``-k`` deselect (hence ``tryfirst``),
    through the ordinary collection hooks, so reports count them and show collection errors."""
    for run in config.stash.get(RUNS, []):
        name = f"idem-harness[{run.target.name}]"
        collector = TargetCollector.from_parent(
            session, name=name, nodeid=name, run=run,
            path=Path(run.target.source) if run.target.source else session.path,
        )
        report = collector.ihook.pytest_make_collect_report(collector=collector)
        collector.ihook.pytest_collectreport(report=report)
        items.extend(node for node in report.result if isinstance(node, pytest.Item))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Each run plays only the scenarios whose items survived selection."""
    for item in session.items:
        if isinstance(item, ScenarioItem):
            item.run.selected.append(item.scenario.name)

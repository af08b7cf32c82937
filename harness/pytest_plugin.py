"""idem-harness as a pytest plugin: the CI gate inside a team's existing pytest run.

``pytest --idem-target payments.toml`` adds one test per scenario of the catalog and one for the
explorer (within the profile's budget of examples), and ``--idem-reference`` the same for the
built-in reference server.  The options choose a profile
(``--idem-profile``, else ``IDEM_PROFILE``, else ``ci`` when ``CI=true``, else ``dev``), and the
tests call the same runner as ``idem-harness run``, writing the same report directory.  It is
registered through the ``pytest11`` entry point; without ``--idem-target`` or
``--idem-reference`` it adds no test and changes nothing in a session.  docs/ci.md shows it in
a CI workflow.

The engine is imported only in a session that asks for the gate: every pytest run on a
machine with idem-harness installed loads this plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from harness._gate import TargetRun

RUNS: pytest.StashKey[list[TargetRun]] = pytest.StashKey()
#: Test ids of the gate's items given as arguments (``idem-harness[name]::scenario``): they name
#: no file, so they are taken out of the paths pytest collects and select items instead.
CHOSEN_IDS: pytest.StashKey[list[str]] = pytest.StashKey()
ID_PREFIX = "idem-harness["

MARKERS = [
    "idem: a test added by idem-harness (-m idem selects them all, -m 'not idem' none)",
    "idem_target(name): the target file's name the test runs against",
    "idem_scenario(name): the scenario the test plays, "
    "e.g. -m \"idem_scenario(name='key-reuse')\"",
    "idem_property(id): a property the scenario exercises, e.g. -m \"idem_property(id='P1')\"",
    "idem_explore: the explorer's test (Hypothesis stories within a budget of examples)",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("idem-harness", "idempotency-key conformance gate (idem-harness)")
    group.addoption("--idem-target", action="append", default=[], metavar="FILE",
                    help="target file (TOML) to verify, one test per scenario (repeatable)")
    group.addoption("--idem-reference", action="store_true",
                    help="verify the built-in reference server too")
    group.addoption("--idem-reference-consumer", action="store_true",
                    help="verify the built-in reference queue consumer too (on RabbitMQ)")
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
    if not files and not (config.getoption("idem_reference")
                          or config.getoption("idem_reference_consumer")):
        return
    from harness._gate import _session  # the engine, only for a session that uses the gate

    for line in _session.scenario_markers():
        config.addinivalue_line("markers", line)
    config.stash[RUNS] = _session.runs_for(config, files)
    config.stash[CHOSEN_IDS] = [a for a in config.args if a.startswith(ID_PREFIX)]
    config.args[:] = [a for a in config.args if not a.startswith(ID_PREFIX)]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    """Collect the harness's items before ``-m`` and ``-k`` deselect (hence ``tryfirst``)."""
    if RUNS in config.stash:
        from harness._gate import _session

        _session.collect(session, config.stash[RUNS], items)
        _session.keep_chosen(config, config.stash[CHOSEN_IDS], items)


def pytest_collection_finish(session: pytest.Session) -> None:
    if RUNS in session.config.stash:
        from harness._gate import _session

        _session.mark_selected(session)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say which targets exercised nothing (``pytest_sessionfinish`` fails the session)."""
    for line in _idle(terminalreporter.config):
        terminalreporter.write_line(line, red=True, bold=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A session whose gate ran nothing but skips fails: nothing run is never a pass."""
    if exitstatus == pytest.ExitCode.OK and _idle(session.config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _idle(config: pytest.Config) -> list[str]:
    if RUNS not in config.stash or config.option.collectonly:
        return []
    from harness._gate import _session

    return _session.idle(config.stash[RUNS])

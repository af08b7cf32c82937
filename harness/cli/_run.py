"""``idem-harness run`` and ``idem-harness check``: parse, then call the runner."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from harness._errors import UsageError
from harness._outcomes import RunFinished, RunResult, ScenarioOutcome
from harness._runner import RunConfig, default_jobs, judge, run_scenarios
from harness._target import Target
from harness.cli._common import DURATION, REPORT_DIR, F, default_report_dir, translate_errors
from harness.judging._checker import CheckResult
from harness.judging._findings import Finding, merge_verdicts
from harness.reports import ConsoleReport, ReportDirectory, load_run
from harness.services._postgres import PostgresServer, start_postgres
from harness.targets._loader import load_target
from harness.targets._reference import FlawNames, reference_target

__all__ = ["BROKER_OPTION", "check", "jobs_option", "own_target", "run", "target_options",
           "verdict_changes"]

#: ``--broker``: which broker the reference consumer reads from.
BROKER_OPTION = click.option(
    "--broker", type=click.Choice(["rabbitmq", "kafka"]), default=None,
    help="with --reference-consumer: the broker it reads from  [default: rabbitmq]")


def choose_target(target_file: str | None, reference: bool, store: str | None,
                  flaw: FlawNames) -> Target:
    if bool(target_file) == reference:
        raise UsageError("give exactly one of --target FILE and --reference")
    if not reference and (store or flaw):
        raise UsageError("--store and --flaw only apply to --reference (the built-in server)")
    if reference:
        return reference_target(store=store, flaw=flaw)
    assert target_file is not None
    return load_target(target_file)


def jobs_option(command: F) -> F:
    """``--jobs``: scenarios at once (``harness.http._parallel``)."""
    return click.option(
        "--jobs", type=click.IntRange(1, 16), default=None, metavar="N",
        help="scenarios at once, each through proxies of its own; those that need the whole "
             "target run on an instance of their own (the reference server) or alone  "
             f"[default: twice the cores, at most 8: {default_jobs()} here]")(command)


def own_target(target: Target, *, reference: bool, store: str | None, flaw: FlawNames,
               postgres: PostgresServer | None) -> Callable[[str], Target] | None:
    """How to give a scenario that needs the whole target an instance with a store of its
    own: the reference server on SQLite keeps its store in the deployment's own directory; on
    ``--postgres``, a fresh database each.  Any other target (or a --store given by hand) has
    one store the harness cannot copy: such scenarios run alone."""
    if not reference or (store is not None and postgres is None):
        return None
    if postgres is None:
        return lambda scenario: target

    def fresh(scenario: str) -> Target:
        name = f"idem_{scenario}".replace("-", "_")
        return reference_target(store=postgres.create_database(name), flaw=flaw)

    return fresh


def target_options(command: F) -> F:
    """The options every command that drives a target shares."""
    for option in reversed([
        click.option("--target", "target_file", metavar="FILE",
                     help="target file (TOML) describing the service under test"),
        click.option("--reference", is_flag=True,
                     help="run against the built-in reference server"),
        click.option("--store", metavar="URL",
                     help="with --reference: sqlite:///PATH or postgresql://..."),
        click.option("--flaw", metavar="NAME", multiple=True,
                     help="with --reference: start the server with this named flaw (repeat "
                          "for several at once)"),
        click.option("--allow-remote", is_flag=True,
                     help="allow a target outside loopback (127.0.0.1, ::1)"),
    ]):
        command = option(command)
    return command


@click.command()
@target_options
@click.option("--scenario", "scenario_names", multiple=True, metavar="NAME",
              help="run only this scenario (repeatable); default: the whole catalog")
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="where to write results.json, junit.xml, history.jsonl (default reports/run-*)")
@click.option("--seed", type=int, default=None, help="seed for the harness's own choices")
@click.option("--retry-horizon", type=DURATION, default="24h", show_default=True,
              help="how late a client may still retry (retention shorter than this is a finding)")
@click.option("--postgres", is_flag=True,
              help="with --reference: the server on a fresh PostgreSQL database (IDEM_PG_DSN "
                   "or a throwaway cluster), reached through a proxy, so store-outage applies")
@click.option("--quiet", is_flag=True, help="print only the summary")
@click.option("--reference-consumer", is_flag=True,
              help="run against the built-in reference queue consumer (on RabbitMQ, or Kafka "
                   "with --broker kafka; --store, --flaw and --postgres apply to it as to "
                   "--reference)")
@BROKER_OPTION
@jobs_option
@translate_errors
def run(target_file: str | None, reference: bool, store: str | None, flaw: tuple[str, ...],
        allow_remote: bool, scenario_names: tuple[str, ...], report_dir: Path | None,
        seed: int | None, retry_horizon: float, postgres: bool, quiet: bool,
        reference_consumer: bool, broker: str | None, jobs: int | None) -> None:
    """Run scenarios against a target and judge the history.

    \b
    Exit codes:
      0    pass: every scenario that could run held, and one could
      1    fail: at least one finding
      2    a usage or setup error (the message says how to fix it); nothing ran
      3    inconclusive: no finding, but something could not be judged (each reason
           printed), or nothing was exercised (every scenario n/a)
      130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM: what finished is in the report,
           marked incomplete
    """
    from scenarios import named_for

    if broker is not None and not reference_consumer:
        raise UsageError("--broker picks the reference consumer's broker: give it with "
                         "--reference-consumer (a target file names its own, [broker] kind)")
    if reference_consumer:
        from harness.consumer._reference import (
            BrokerName,
            reference_consumer_target,
            run_reference_consumer,
        )

        kind: BrokerName = "kafka" if broker == "kafka" else "rabbitmq"
        # its kind only: the store and the flaw are checked with the other flags, below
        chosen = named_for(reference_consumer_target(store=None, flaw=None, broker=kind),
                           scenario_names)
        sys.exit(run_reference_consumer(
            chosen, other_target=bool(target_file or reference), store=store, flaw=flaw,
            postgres=postgres, report_dir=report_dir or default_report_dir(), seed=seed,
            retry_horizon=retry_horizon, quiet=quiet, broker=kind).exit_code)
    if postgres and (store or not reference):
        raise UsageError("--postgres starts the reference server on PostgreSQL: give it with "
                         "--reference, and without --store (or give --store postgresql://...)")
    chosen = named_for(choose_target(target_file, reference, store, flaw), scenario_names)
    with ExitStack() as stack:
        server = stack.enter_context(start_postgres()) if postgres else None
        if server is not None:
            store = server.create_database("idem_run")
        target = choose_target(target_file, reference, store, flaw)
        report_dir = report_dir or default_report_dir()
        config = RunConfig(target=target, scenarios=chosen, report_dir=report_dir, seed=seed,
                           allow_remote=allow_remote, retry_horizon=retry_horizon,
                           jobs=jobs or default_jobs(),
                           own_target=own_target(target, reference=reference, store=store,
                                                 flaw=flaw, postgres=server))
        result = run_scenarios(config, [ReportDirectory(report_dir), ConsoleReport(quiet=quiet)])
    sys.exit(result.exit_code)


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False))
@click.option("--write-to", type=REPORT_DIR, default=None,
              help="also write the judged report (results.json, junit.xml, index.html, "
                   "history.jsonl) to this directory; RUN_DIR itself is never changed")
@translate_errors
def check(run_dir: Path, write_to: Path | None) -> None:
    """Judge a saved run again from its history, without touching the target or the run, and
    say where the verdict differs from the saved one (exit as run: 0 pass, 1 findings, 2 error,
    3 inconclusive; 130/143 for a run that was interrupted)."""
    if write_to is not None and write_to.resolve() == run_dir.resolve():
        raise UsageError("--write-to must name another directory: check never rewrites the "
                         "run it judges")
    saved, target, histories = load_run(run_dir)
    reproduce = {(f["property"], f.get("key")): f.get("reproduce")
                 for scenario in saved["scenarios"] for f in scenario.get("findings", [])}
    outcomes = []
    for scenario in saved["scenarios"]:
        events = histories.get(scenario["name"], [])
        if scenario["verdict"] == "n/a" or not events:
            outcomes.append(ScenarioOutcome(scenario["name"], scenario["verdict"],
                                            tuple(scenario["properties"]),
                                            reason=scenario.get("reason")))
            continue
        as_before = list(scenario.get("property_verdicts") or {}) or None  # what it judged
        # With --write-to the scripts go there with the report; else a finding keeps the
        # script the run wrote for it, in RUN_DIR (a new one has none: check writes nothing).
        result = judge(events, target, saved["retry_horizon"], base_url="",
                       properties=as_before,
                       scripts=(write_to, scenario["name"]) if write_to is not None else None)
        if write_to is None:
            result = _with_saved_reproductions(result, reproduce)
        verdict = result.verdict
        if scenario.get("reason"):  # the scenario did not finish when it ran
            verdict = merge_verdicts([verdict, "unknown"])
        outcomes.append(ScenarioOutcome(scenario["name"], verdict,
                                        tuple(scenario["properties"]), result,
                                        scenario.get("reason"), tuple(events),
                                        scenario.get("seconds", 0.0)))
    changes = verdict_changes(saved, outcomes)
    judged = RunResult(target, tuple(outcomes), saved["seed"], saved["started_at"],
                       write_to or run_dir, saved["retry_horizon"], saved.get("seconds", 0.0),
                       saved["complete"], planned=tuple(saved.get("planned") or ()),
                       stopped_by=saved.get("stopped_by"),
                       extra={**(saved.get("extra") or {}),
                              "check": {"of": str(run_dir), "saved_verdict": saved.get("verdict"),
                                        "changes": changes}})
    if write_to is not None:
        write_to.mkdir(parents=True, exist_ok=True)
        ReportDirectory(write_to).handle(RunFinished(judged))  # says what it could not write
    ConsoleReport(quiet=True).handle(RunFinished(judged))
    _say_what_changed(saved.get("verdict"), judged.verdict, changes)
    sys.exit(judged.exit_code)


def verdict_changes(saved: dict[str, Any], outcomes: Sequence[ScenarioOutcome]) -> list[str]:
    """Where the judgement now differs from the one the run saved: each scenario's verdict and
    each property's, in words (``key-reuse: fail -> pass (P4: fail -> pass)``)."""
    before = {s["name"]: s for s in saved.get("scenarios", [])}
    changes = []
    for outcome in outcomes:
        old = before.get(outcome.name)
        if old is None:
            continue
        was = old.get("property_verdicts") or {}
        now = {pid: r.verdict for pid, r in outcome.check.results.items()} if outcome.check \
            else {}
        moved = [f"{pid}: {was[pid]} -> {now[pid]}" for pid in now
                 if pid in was and was[pid] != now[pid]]
        if old.get("verdict") != outcome.verdict or moved:
            changes.append(f"{outcome.name}: {old.get('verdict')} -> {outcome.verdict}"
                           + (f" ({'; '.join(moved)})" if moved else ""))
    return changes


def _say_what_changed(saved: str | None, now: str, changes: Sequence[str]) -> None:
    if not changes and saved == now:
        click.echo(f"the same verdict as the run saved: {now}", err=True)
        return
    click.secho(f"the verdict changed: the run saved {str(saved).upper()}, judged again it is "
                f"{now.upper()}" if saved != now else
                "the verdict is the same, but scenarios changed:", fg="yellow", err=True)
    for change in changes:
        click.secho(f"  {change}", fg="yellow", err=True)


def _with_saved_reproductions(result: CheckResult,
                              saved: dict[tuple[str, str | None], str | None]) -> CheckResult:
    """Keep the reproduction the run wrote for a finding it had (its script, in the run's
    directory); a finding the run did not have gets none here, not a ``curl`` line to a port
    that is gone (``--write-to`` writes its script)."""
    def kept(finding: Finding) -> Finding:
        return replace(finding, reproduce=saved.get((finding.property, finding.key)) or "")

    results = {pid: replace(r, findings=tuple(kept(f) for f in r.findings))
               for pid, r in result.results.items()}
    return replace(result, results=results, findings=[kept(f) for f in result.findings])

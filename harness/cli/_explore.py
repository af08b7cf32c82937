"""``idem-harness explore`` and ``idem-harness replay``: parse, then call the explorer."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

import click

from harness._errors import UsageError
from harness._profiles import get_profile, in_ci
from harness._runner import default_jobs
from harness._target import Target
from harness.cli._common import DURATION, REPORT_DIR, default_report_dir, translate_errors
from harness.cli._run import BROKER_OPTION, choose_target, target_options
from harness.explore import (
    DEFAULT_SHRINK_SECONDS,
    ExploreConfig,
    ReplayConfig,
    explore,
    load_story,
    render_story,
    replay,
    replay_line,
    searches_at_once,
    story_heading,
)
from harness.reports import ConsoleReport, ReportDirectory
from harness.targets._loader import saved_target
from harness.targets._reference import FlawNames

__all__ = ["EXAMPLES_DIR", "example_database", "explore_command", "replay_command"]


#: Where, beside the reports, failing examples are kept for the next exploration.
EXAMPLES_DIR = ".explore-examples"


def example_database(target: Target, seed: int | None, report_dir: Path) -> Path:
    """Hypothesis's example database for this target (its name and how it is started) and
    this seed (or any seed), beside the report directory: with the project's reports, never
    shared by every checkout on the machine."""
    identity = json.dumps(target.model_dump(mode="json", exclude={"source"}), sort_keys=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", target.name).strip("-")
    kept = "any-seed" if seed is None else f"seed-{seed}"
    return report_dir.absolute().parent / EXAMPLES_DIR / f"{slug}-{digest}" / kept


def _saved_examples(database: Path) -> int:
    """How many failing examples the database holds (one file each, under a key directory)."""
    if not database.is_dir():
        return 0
    return sum(1 for entry in database.rglob("*") if entry.is_file())


def _target(target_file: str | None, reference: bool, store: str | None, flaw: FlawNames,
            reference_consumer: bool, broker: str | None = None) -> Target:
    """The target the options name: a file, the reference server, or the reference consumer
    on the broker ``--broker`` names (``--store`` and ``--flaw`` apply to either reference)."""
    if broker is not None and not reference_consumer:
        raise UsageError("--broker picks the reference consumer's broker: give it with "
                         "--reference-consumer (a target file names its own, [broker] kind)")
    if reference_consumer:
        if target_file or reference:
            raise UsageError("give one of --target FILE, --reference and --reference-consumer")
        from harness.consumer._reference import reference_consumer_target

        return reference_consumer_target(store=store, flaw=flaw,
                                         broker="kafka" if broker == "kafka" else "rabbitmq")
    return choose_target(target_file, reference, store, flaw)


_REFERENCE_CONSUMER = click.option(
    "--reference-consumer", is_flag=True,
    help="against the built-in reference queue consumer (on RabbitMQ, or Kafka with --broker "
         "kafka; --store and --flaw apply to it as to --reference)")


@click.command("explore")
@target_options
@_REFERENCE_CONSUMER
@BROKER_OPTION
@click.option("--max-examples", type=click.IntRange(min=1), default=None,
              help="examples to try before giving up  [default: the profile's budget: "
                   f"{get_profile('dev').explore_max_examples} (dev), "
                   f"{get_profile('ci').explore_max_examples} (ci)]")
@click.option("--seed", type=int, default=None,
              help="draw the same stories again (failing examples are kept per seed, beside "
                   "the reports)")
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="where to write story.json, results.json, junit.xml, history.jsonl "
                   "(default reports/run-*)")
@click.option("--shrink-time", type=DURATION, default=f"{DEFAULT_SHRINK_SECONDS:g}s",
              show_default=True,
              help="how long Hypothesis may shrink a failing story (then dropping single "
                   "steps takes at most half as long)")
@click.option("--retry-horizon", type=DURATION, default="24h", show_default=True,
              help="how late a client may still retry (retention shorter than this is a finding)")
@click.option("--fresh", is_flag=True,
              help="forget the failing examples kept from earlier explorations of this target "
                   "and seed (beside the reports, in " + EXAMPLES_DIR + "/) and start clean")
@click.option("--trust-moved-clock", is_flag=True,
              help="count a finding seen only with a moved clock (a jump made while a request "
                   "ran) without telling its story again in real time")
@click.option("--no-opening", is_flag=True,
              help="let Hypothesis draw from the first example, without first telling the "
                   "opening's shortest stories (a retry, a reuse, a burst...)")
@click.option("--jobs", type=click.IntRange(1, 16), default=None, metavar="N",
              help="searches at once, each on a target instance of its own with a seed "
                   "derived from --seed, sharing the budget and the opening; findings merged  "
                   f"[default: as for run, twice the cores, at most 8: {default_jobs()} here; "
                   "one for a target the harness cannot start apart]")
@click.option("--first-only", is_flag=True,
              help="stop at the first failing story (shortened), instead of going on for "
                   "every distinct failure within the budget: a gate that only needs to fail "
                   "fast")
@click.option("--quiet", is_flag=True, help="print only the summary and the story")
@translate_errors
def explore_command(target_file: str | None, reference: bool, store: str | None,
                    flaw: tuple[str, ...], allow_remote: bool, reference_consumer: bool,
                    broker: str | None, max_examples: int | None, seed: int | None,
                    report_dir: Path | None, shrink_time: float, retry_horizon: float, fresh: bool,
                    trust_moved_clock: bool, no_opening: bool, jobs: int | None,
                    first_only: bool, quiet: bool) -> None:
    """Let Hypothesis draw stories of requests, retries and faults (or, for a queue consumer,
    publishes, copies, republishes, lost acks, kills and restarts, stalls, clock jumps and
    poison messages); print and save the shortest failing one (exit 0 nothing failed, 1 a
    story failed, 2 error, 3 something could not be judged, 130/143 interrupted)."""
    target = _target(target_file, reference, store, flaw, reference_consumer, broker)
    report_dir = report_dir or default_report_dir()
    database = example_database(target, seed, report_dir)
    if fresh:
        shutil.rmtree(database, ignore_errors=True)
    saved = 0 if in_ci() else _saved_examples(database)
    if saved:
        click.echo(f"explore: replaying {saved} failing example(s) saved by an earlier "
                   f"exploration of this target in {database} before drawing "
                   f"(--fresh starts clean)")
    config = ExploreConfig(
        target=target,
        max_examples=max_examples or get_profile().explore_max_examples,
        seed=seed,
        report_dir=report_dir,
        database=database,
        shrink_seconds=shrink_time,
        allow_remote=allow_remote,
        retry_horizon=retry_horizon,
        trust_moved_clock=trust_moved_clock,
        opening=not no_opening,
        jobs=jobs or default_jobs(),
        first_only=first_only,
    )
    _, why = searches_at_once(target, config.jobs)
    if jobs is not None and why is not None:
        click.echo(f"explore: one search, not {jobs}: {why}", err=True)
    done = explore(config, [ReportDirectory(report_dir), ConsoleReport(quiet=quiet)])
    numbers = done.result.extra["explore"]
    assert isinstance(numbers, dict)
    stopped = done.result.stopped_by
    for number, (story, path) in enumerate(zip(done.stories, done.story_paths, strict=True), 1):
        click.echo(render_story(story, replay_line=replay_line(path),
                                heading=story_heading(story, number, len(done.stories))))
    if not done.stories and stopped is None:
        sent = "requests" if "requests" in numbers else "publishes"
        click.echo(f"No story failed: {numbers['examples']} examples, {numbers['steps']} steps, "
                   f"{numbers[sent]} {sent} (their history is in {report_dir}).")
    for why in numbers["not_drawn"].values():  # what this exploration never tried
        click.echo(f"note: {why}")
    if stopped is not None:
        click.secho(f"stopped by {stopped} after {numbers['examples']} examples; what was found "
                    f"is in {report_dir}, marked incomplete", fg="yellow", err=True)
    sys.exit(done.result.exit_code)


@click.command("replay")
@click.argument("story_file", type=click.Path(path_type=Path, dir_okay=False))
@target_options
@_REFERENCE_CONSUMER
@BROKER_OPTION
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="where to write the replayed story.json and the reports (default "
                   "reports/run-*)")
@click.option("--retry-horizon", type=DURATION, default="24h", show_default=True)
@click.option("--trust-moved-clock", is_flag=True,
              help="count a finding seen only with a moved clock without telling the story "
                   "again in real time")
@click.option("--quiet", is_flag=True, help="print only the summary and the story")
@translate_errors
def replay_command(story_file: Path, target_file: str | None, reference: bool,
                   store: str | None, flaw: tuple[str, ...], allow_remote: bool,
                   reference_consumer: bool, broker: str | None, report_dir: Path | None,
                   retry_horizon: float, trust_moved_clock: bool, quiet: bool) -> None:
    """Run a saved story again, against its own target or the one given, and judge it
    (exit 0 it holds now, 1 it fails, 2 error)."""
    story = load_story(story_file)
    if target_file or reference or store or flaw or reference_consumer or broker:
        target = _target(target_file, reference, store, flaw, reference_consumer, broker)
    elif story.target_definition is not None:  # refused with every problem, never a traceback
        target = saved_target(story.target_definition)
    else:
        target = story.saved_target()  # which says what to give instead
    report_dir = report_dir or default_report_dir()
    config = ReplayConfig(target=target, report_dir=report_dir, allow_remote=allow_remote,
                          retry_horizon=retry_horizon, trust_moved_clock=trust_moved_clock)
    done = replay(story, config, [ReportDirectory(report_dir), ConsoleReport(quiet=quiet)])
    click.echo(render_story(done.story, heading=f"Replay of {story_file} against "
                                                f"{target.name}:"))
    if story.property is not None:
        tellings = done.result.extra["replay"]["tellings"]  # type: ignore[index]
        told = f" (on telling {tellings}: the story races)" if tellings > 1 else ""
        verdict = (f"reproduced{told}" if done.reproduced
                   else f"not reproduced in {tellings} telling(s) (found: "
                        f"{', '.join(done.story.properties) or 'nothing'})")
        click.echo(f"{story.property}: {verdict}")
    sys.exit(done.result.exit_code)

"""``idem-harness explore`` and ``idem-harness replay``: parse, then call the explorer."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

import click

from harness._paths import state_dir
from harness._profiles import get_profile
from harness._target import Target, saved_target
from harness.cli._common import DURATION, REPORT_DIR, default_report_dir, translate_errors
from harness.cli._run import choose_target, target_options
from harness.explore import (
    DEFAULT_SHRINK_SECONDS,
    ExploreConfig,
    ReplayConfig,
    explore,
    load_story,
    render_story,
    replay,
    replay_line,
)
from harness.reports import ConsoleReport, ReportDirectory

__all__ = ["explore_command", "replay_command"]


def _database(target: Target) -> Path:
    """Hypothesis's example database for this target (name and how it is started)."""
    identity = json.dumps(target.model_dump(mode="json", exclude={"source"}), sort_keys=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", target.name).strip("-")
    return state_dir() / "explore" / f"{slug}-{digest}"


@click.command("explore")
@target_options
@click.option("--max-examples", type=click.IntRange(min=1), default=None,
              help="examples to try before giving up  [default: the profile's budget: "
                   f"{get_profile('dev').explore_max_examples} (dev), "
                   f"{get_profile('ci').explore_max_examples} (ci)]")
@click.option("--seed", type=int, default=None,
              help="draw the same stories again (no example database is used then)")
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="where to write story.json, results.json, junit.xml, history.jsonl "
                   "(default reports/run-*)")
@click.option("--shrink-time", type=DURATION, default=f"{DEFAULT_SHRINK_SECONDS:g}s",
              show_default=True,
              help="how long Hypothesis may shrink a failing story (then dropping single "
                   "steps takes at most half as long)")
@click.option("--retry-horizon", type=DURATION, default="24h", show_default=True,
              help="how late a client may still retry (retention shorter than this is a finding)")
@click.option("--quiet", is_flag=True, help="print only the summary and the story")
@translate_errors
def explore_command(target_file: str | None, reference: bool, store: str | None,
                    flaw: str | None, allow_remote: bool, max_examples: int | None,
                    seed: int | None, report_dir: Path | None, shrink_time: float,
                    retry_horizon: float, quiet: bool) -> None:
    """Let Hypothesis draw stories of requests, retries and faults; print and save the
    shortest failing one (exit 0 nothing failed, 1 a story failed, 2 error)."""
    target = choose_target(target_file, reference, store, flaw)
    report_dir = report_dir or default_report_dir()
    config = ExploreConfig(
        target=target,
        max_examples=max_examples or get_profile().explore_max_examples,
        seed=seed,
        report_dir=report_dir,
        database=None if seed is not None else _database(target),
        shrink_seconds=shrink_time,
        allow_remote=allow_remote,
        retry_horizon=retry_horizon,
    )
    done = explore(config, [ReportDirectory(report_dir), ConsoleReport(quiet=quiet)])
    if done.story is not None:
        click.echo(render_story(done.story, replay_line=replay_line(done.story_path)))
    else:
        numbers = done.result.extra["explore"]
        assert isinstance(numbers, dict)
        click.echo(f"No story failed: {numbers['examples']} examples, {numbers['steps']} steps, "
                   f"{numbers['requests']} requests (their history is in {report_dir}).")
    sys.exit(done.result.exit_code)


@click.command("replay")
@click.argument("story_file", type=click.Path(path_type=Path, dir_okay=False))
@target_options
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="where to write the replayed story.json and the reports (default "
                   "reports/run-*)")
@click.option("--retry-horizon", type=DURATION, default="24h", show_default=True)
@click.option("--quiet", is_flag=True, help="print only the summary and the story")
@translate_errors
def replay_command(story_file: Path, target_file: str | None, reference: bool,
                   store: str | None, flaw: str | None, allow_remote: bool,
                   report_dir: Path | None, retry_horizon: float, quiet: bool) -> None:
    """Run a saved story again, against its own target or the one given, and judge it
    (exit 0 it holds now, 1 it fails, 2 error)."""
    story = load_story(story_file)
    if target_file or reference or store or flaw:
        target = choose_target(target_file, reference, store, flaw)
    elif story.target_definition is not None:  # refused with every problem, never a traceback
        target = saved_target(story.target_definition)
    else:
        target = story.saved_target()  # which says what to give instead
    report_dir = report_dir or default_report_dir()
    config = ReplayConfig(target=target, report_dir=report_dir, allow_remote=allow_remote,
                          retry_horizon=retry_horizon)
    done = replay(story, config, [ReportDirectory(report_dir), ConsoleReport(quiet=quiet)])
    click.echo(render_story(done.story, heading=f"Replay of {story_file} against "
                                                f"{target.name}:"))
    if story.property is not None:
        verdict = ("reproduced" if done.reproduced
                   else f"not reproduced (found: {', '.join(done.story.properties) or 'nothing'})")
        click.echo(f"{story.property}: {verdict}")
    sys.exit(done.result.exit_code)

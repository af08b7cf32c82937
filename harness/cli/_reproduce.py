"""``idem-harness reproduce``: what a finding's script runs (``reproduce/<scenario>-<n>.sh``).

It reads the reproduction the script carries, starts the target again as the run did (the
reference server with the same flaw on a fresh store of the same kind, or the target file as
saved; or it plays against a running instance at ``--url``), plays the story, and exits 1 when
the findings' properties broke again, 0 when they did not this time, 2 when it could not say.
"""

from __future__ import annotations

import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

import click
from rich.console import Console

from harness._errors import UsageError
from harness._outcomes import Handler, RunEvent, RunFinished
from harness._target import RecorderEffects, Target
from harness.cli._common import REPORT_DIR, translate_errors
from harness.http.reproduction._replay import cannot_play, replay_reproduction, timing_notes
from harness.http.reproduction._reproduction import NO_REPLAY, Reproduction
from harness.reports import ReportDirectory, summary_table
from harness.services._postgres import start_postgres
from harness.targets._loader import saved_target
from harness.targets._reference import reference_target

__all__ = ["reproduce"]


def replay_target(reproduction: Reproduction, *, url: str | None, stack: ExitStack) -> Target:
    """The target to play against: the instance at ``url``, or one started as the run did, on
    a store of its own (a PostgreSQL database made for the replay and dropped after it)."""
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--url {url!r} must start with http://, e.g. http://127.0.0.1:8000")
        target = saved_target(reproduction.target)
        if isinstance(target.effects, RecorderEffects) and not target.effects.port:
            raise UsageError("the target reports its effects to the harness's recorder, which "
                             "a running instance does not know: run the script without BASE_URL")
        keeps_store = target.store_proxy is not None and not target.store_proxy.picks_port \
            and reproduction.reference is None
        return target.model_copy(update={
            "url": url, "start": None, "clock": None,
            "store_proxy": target.store_proxy if keeps_store else None})
    reference = reproduction.reference
    if reference is None:
        return saved_target(reproduction.target)
    store = None
    if reference.get("store") == "postgresql":
        store = stack.enter_context(start_postgres()).create_database("idem_reproduce")
    return reference_target(store=store, flaw=reference.get("flaw"))


class _Summary:
    """The replay's scenario table, on stderr (its findings are the verdict's to tell)."""

    def handle(self, event: RunEvent) -> None:
        if isinstance(event, RunFinished):
            Console(stderr=True).print(summary_table(event.result))


def _what(reproduction: Reproduction) -> str:
    if reproduction.plays_scenario:
        return f"scenario {reproduction.scenario} with seed {reproduction.seed}"
    return f"the story of key {reproduction.key} in {reproduction.scenario}"


@click.command("reproduce", hidden=True)
@click.argument("reproduction_file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--url", metavar="BASE_URL", default=None,
              help="play against this running instance (fresh: nothing stored yet) instead of "
                   "starting the target")
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="keep the replay's report here (default: a temporary directory, removed)")
@translate_errors
def reproduce(reproduction_file: Path, url: str | None, report_dir: Path | None) -> None:
    """Play a finding's story again, as its script does, and judge it (exit 1 it broke again,
    0 not this time, 2 it could not be played or judged; 130/143 interrupted)."""
    try:
        text = reproduction_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {reproduction_file}: {exc}") from exc
    reproduction = Reproduction.from_json(text, source=str(reproduction_file))
    with ExitStack() as stack:
        target = replay_target(reproduction, url=url, stack=stack)
        why_not = cannot_play(reproduction.events, target)
        if why_not is not None:  # before anything starts
            click.echo(f"no verdict: the story cannot be played here: {why_not}")
            sys.exit(NO_REPLAY)
        for note in timing_notes(reproduction.events, target):  # said before it plays
            click.echo(f"note: {note}", err=True)
        directory = report_dir or Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="idem-replay-")))
        handlers: list[Handler] = [_Summary()]
        if report_dir is not None:
            handlers.insert(0, ReportDirectory(report_dir))
        click.echo(f"replaying {_what(reproduction)} against {target.name} ...", err=True)
        replayed = replay_reproduction(reproduction, target, report_dir=directory,
                                       handlers=handlers)
    result = replayed.result
    if result.stopped_by is not None:
        sys.exit(result.exit_code)
    click.echo(replayed.verdict)
    if report_dir is not None:
        click.echo(f"the replay's report: {report_dir / 'index.html'}", err=True)
    sys.exit(replayed.exit_code if replayed.exit_code in (0, 1) else NO_REPLAY)

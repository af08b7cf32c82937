"""``idem-harness probe``: ask the service what it promises, and say what it answered.

Print what was seen beside each promise, and (with ``--write``) write it into the target file,
keeping the user's comments."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness._errors import TargetFileError
from harness.cli._common import translate_errors
from harness.reports._files import write_atomic
from harness.targets._loader import load_target

if TYPE_CHECKING:
    from harness.http.drafting._probe import ProbeReport

__all__ = ["probe"]

_COLOURS = {"bug": "red", "deviation": "yellow", "learned": "cyan", "unknown": "magenta"}


def render_probe(report: ProbeReport) -> str:
    """What the probe saw, one promise a line, then what it charged."""
    target = report.target
    lines = [click.style(f"probe of {target.name} ({target.endpoint.label})", bold=True)
             + f": {report.requests} requests under fresh keys"
             + (f", tenant {report.tenant}" if report.tenant else "")]
    if len(target.keyed_operations) > 1:
        lines.append(f"  (only the first operation is probed; {len(target.keyed_operations) - 1} "
                     "other(s) keep their promises)")
    width = max(len(f"{o.section}.{o.field or '*'}") for o in report.observations)
    for observation in report.observations:
        name = f"{observation.section}.{observation.field or '*'}"
        kind = click.style(f"{observation.kind:<9}", fg=_COLOURS.get(observation.kind))
        value = "" if not observation.writes else f" -> {observation.value!r}"
        lines.append(f"  {name:<{width}}  {kind}  {observation.note}{value}")
    effects = report.effects
    keyed = {k: n for k, n in effects.counted.items() if k is not None}
    summary = (f"effects: {sum(keyed.values())} charge(s) counted under {len(keyed)} key(s)"
               + (f", {effects.counted[None]} without a key" if None in effects.counted else ""))
    wrong = effects.unexpected
    summary += ", each as expected" if not wrong and keyed else ""
    lines.append(summary)
    for key, (counted, expected) in wrong.items():
        lines.append(click.style(f"  BUG: {key if key is not None else 'no key'}: {counted} "
                                 f"charge(s), {expected} expected", fg="red"))
    lines.extend(f"  not counted: {problem}" for problem in effects.problems)
    return "\n".join(lines)


@click.command("probe")
@click.option("--target", "target_file", required=True, metavar="FILE",
              help="the target file to probe (and, with --write, to rewrite)")
@click.option("--write", is_flag=True,
              help="write what was seen into the file (comments kept); default: print a diff")
@click.option("--allow-remote", is_flag=True,
              help="allow a target outside loopback (127.0.0.1, ::1)")
@click.option("--seed", type=int, default=None, help="seed for the probe's keys and bodies")
@translate_errors
def probe(target_file: str, write: bool, allow_remote: bool, seed: int | None) -> None:
    """Send a few requests with fresh keys and report each promise as seen (exit 0; 2 on a
    usage error).  Bugs are printed and written as comments, never as promises; what
    contradicts a promise the file makes (not a FILL IN) is reported as a likely bug and never
    written over it."""
    from harness.http.drafting._probe import probe_target
    from harness.http.drafting._probe_edit import apply_observations, declared_promises, diff

    path = Path(target_file)
    if not path.is_file():
        raise TargetFileError(target_file, [("", "the file does not exist", "give the path of "
                                             "a target file, e.g. one `idem-harness init` "
                                             "wrote")])
    target = load_target(path)
    before = path.read_text(encoding="utf-8")
    report = probe_target(target, allow_remote=allow_remote, seed=seed,
                          declared=declared_promises(before))
    after = apply_observations(before, report.observations, source=str(path))
    click.echo(render_probe(report), err=True)
    if after == before:
        click.echo(f"{path}: nothing to change", err=True)
    elif write:
        write_atomic(path, after)
        click.echo(f"wrote {path}; next: idem-harness run --target {path}", err=True)
    else:
        click.echo(diff(before, after, str(path)), nl=False)
        click.echo(f"(not written: give --write to write it into {path})", err=True)
    sys.exit(0)

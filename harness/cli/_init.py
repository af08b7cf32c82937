"""``idem-harness init``: draft a commented target file from an OpenAPI document or a URL.

From a document, or from a URL and a path, so a new user starts from the service's own
description instead of a blank page."""

from __future__ import annotations

import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness._errors import UsageError
from harness.cli._common import translate_errors
from harness.reports._files import file_mode, write_atomic

if TYPE_CHECKING:  # imported when the command runs: the OpenAPI libraries take half a second
    from harness.http.drafting._openapi import ApiDocument, ApiOperation
    from harness.http.drafting._skeleton import Draft

__all__ = ["init"]


def _start_command(start: str | None) -> list[str] | None:
    if start is None:
        return None
    try:
        command = shlex.split(start)
    except ValueError as exc:
        raise UsageError(f"--start {start!r} cannot be split into words: {exc}\n  fix: quote "
                         "it as a shell would, e.g. --start 'python -m app --port {port}'"
                         ) from exc
    if not command or not any("{port}" in part for part in command):
        raise UsageError(f"--start {start!r} must contain {{port}}, the free port the harness "
                         "picks\n  fix: e.g. --start 'python -m app --port {port}'")
    return command


def _url(option: str, value: str | None) -> None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise UsageError(f"{option} {value!r} is not an http URL\n  fix: write it as "
                         "http://127.0.0.1:8000")


def _chosen(api: ApiDocument, wanted: tuple[str, ...]) -> list[ApiOperation]:
    """The operations to draft: those named by ``--operation``, else every keyed one."""
    if wanted:
        chosen = []
        for text in wanted:
            method, _, path = text.strip().partition(" ")
            operation = api.operation(method, path.strip())
            if operation is None:
                listed = ", ".join(o.label for o in api.operations) or "none"
                raise UsageError(f"--operation {text!r}: the document has no such operation\n"
                                 f"  fix: give one of: {listed}")
            chosen.append(operation)
        return chosen
    if api.keyed:
        return list(api.keyed)
    writes = ", ".join(o.label for o in api.unkeyed_writes) or "none"
    raise UsageError(
        f"{api.source}: no operation declares an Idempotency-Key header parameter.\n"
        f"  its POST and PATCH operations: {writes}\n"
        "  fix: declare the header (in: header, name: Idempotency-Key) on the operations that "
        "take a key, or draft them anyway with --operation 'POST /path' (repeatable)")


def _refuse_existing(output: Path, force: bool) -> None:
    if output.is_dir():
        raise UsageError(f"-o {output} is a directory\n  fix: give a file name, e.g. "
                         f"-o {output / 'target.toml'}")
    if output.exists() and not force:
        raise UsageError(f"{output} exists; init never overwrites a file\n  fix: give --force "
                         "to replace it, or -o another file")


def _write_new(output: Path, text: str) -> None:
    """Write ``text`` to ``output`` whole, failing if the file appeared meanwhile: a temporary
    file beside it, hard-linked into place (a link never replaces an existing name)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), file_mode(output))
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.link(temporary, output)
    except FileExistsError:
        raise UsageError(f"{output} appeared while init was writing; it was left as it is\n"
                         "  fix: give --force to replace it") from None
    finally:
        Path(temporary).unlink(missing_ok=True)


def _summary(draft: Draft, text: str, output: str) -> str:
    operations = ", ".join(f"{o.method} {o.path}" for o in draft.operations)
    fill_in = text.count("FILL IN")
    target = "THE_FILE" if output == "-" else shlex.quote(output)
    return (f"drafted {len(draft.operations)} keyed operation(s): {operations}; {fill_in} "
            f"line(s) marked FILL IN\nnext:  idem-harness probe --target {target} --write\n"
            f"       idem-harness run --target {target}")


@click.command("init")
@click.option("--openapi", "openapi_source", metavar="FILE_OR_URL",
              help="an OpenAPI 3.0/3.1 document (YAML or JSON): a file, or a loopback URL")
@click.option("--base-url", metavar="URL",
              help="with --openapi: where the service runs (default: the document's server)")
@click.option("--operation", "operations", multiple=True, metavar="'METHOD PATH'",
              help="with --openapi: draft this operation even if it declares no key header "
                   "(repeatable; default: every operation that declares one)")
@click.option("--url", metavar="URL", help="without --openapi: where the service runs")
@click.option("--path", metavar="PATH", help="without --openapi: the keyed operation's path")
@click.option("--method", default="POST", show_default=True,
              help="without --openapi: the keyed operation's method")
@click.option("--start", metavar="COMMAND",
              help="the command that starts the service, with {port}: the harness starts it "
                   "(instead of a url)")
@click.option("--ready-path", metavar="PATH",
              help="with --start: a path that answers 2xx once the service is up")
@click.option("--name", help="the target's name (default: from the document's title)")
@click.option("-o", "--output", default="target.toml", show_default=True, metavar="FILE",
              help="where to write the target file; '-' prints it")
@click.option("--force", is_flag=True, help="replace an existing output file")
@click.option("--allow-remote", is_flag=True,
              help="allow fetching the document (and its $refs) from outside loopback")
@translate_errors
def init(openapi_source: str | None, base_url: str | None, operations: tuple[str, ...],
         url: str | None, path: str | None, method: str, start: str | None,
         ready_path: str | None, name: str | None, output: str, force: bool,
         allow_remote: bool) -> None:
    """Draft a commented target file; then `probe --write` and `run`."""
    from harness.http.drafting._openapi import read_openapi
    from harness.http.drafting._skeleton import draft_for_path, draft_from_openapi, render_draft

    if openapi_source is not None and (url or path):
        raise UsageError("--url and --path draft without a document; with --openapi give "
                         "--base-url (and --operation to choose operations)")
    if openapi_source is None and (base_url or operations):
        raise UsageError("--base-url and --operation go with --openapi; without a document "
                         "give --url and --path")
    if openapi_source is None and path is None:
        raise UsageError("give --openapi FILE_OR_URL, or --path PATH (and --url URL) to draft "
                         "without a document\n  fix: e.g. idem-harness init --openapi "
                         "openapi.yaml, or idem-harness init --url http://127.0.0.1:8000 "
                         "--path /charges")
    if path is not None and not path.startswith("/"):
        raise UsageError(f"--path {path!r} must start with /, e.g. /charges")
    if ready_path is not None and start is None:
        raise UsageError("--ready-path goes with --start (a service the harness starts)")
    _url("--url", url)
    _url("--base-url", base_url)
    command = _start_command(start)
    target = None if output == "-" else Path(output)
    if target is not None:
        _refuse_existing(target, force)
    if openapi_source is not None:
        api = read_openapi(openapi_source, allow_remote=allow_remote)
        draft = draft_from_openapi(api, _chosen(api, operations), name=name, base_url=base_url,
                                   start=command, ready_path=ready_path, source=openapi_source)
    else:
        assert path is not None
        draft = draft_for_path(url, method, path, name=name, start=command,
                               ready_path=ready_path)
    text = render_draft(draft)
    if target is None:
        click.echo(text, nl=False)
    elif force:
        write_atomic(target, text)
    else:
        _write_new(target, text)
    if target is not None:
        click.echo(f"wrote {target}", err=True)
    click.echo(_summary(draft, text, output), err=True)
    sys.exit(0)

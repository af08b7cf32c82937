"""What every command shares: turning harness errors into exit code 2 with their fix."""

from __future__ import annotations

import functools
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from harness._durations import parse_duration
from harness._errors import HarnessError
from harness._interrupts import Interrupted

__all__ = ["DURATION", "EXIT_FINDINGS", "EXIT_PASS", "EXIT_USAGE", "REPORT_DIR", "F",
           "default_report_dir", "translate_errors"]

EXIT_PASS, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
F = TypeVar("F", bound=Callable[..., Any])


def translate_errors(command: F) -> F:
    """Show a ``HarnessError`` as its message (which says how to fix it) and exit 2; an
    interruption exits 130 (SIGINT) or 143 (SIGTERM), without a traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except HarnessError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(EXIT_USAGE)
        except OSError as exc:  # a disk that filled up, a file that vanished: never "findings"
            where = f" ({exc.filename})" if exc.filename else ""
            click.secho(f"error: {exc.strerror or exc}{where}\n  fix: free some space or "
                        "choose another place to write, and run the command again",
                        fg="red", err=True)
            sys.exit(EXIT_USAGE)
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as ``Interrupted``
            stopped = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
            click.secho(f"stopped: {stopped}; what finished is in the report, marked "
                        "incomplete", fg="yellow", err=True)
            sys.exit(stopped.exit_code)

    return wrapper  # type: ignore[return-value]


class _Duration(click.ParamType):  # type: ignore[type-arg]
    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


DURATION = _Duration()


class _ReportDir(click.ParamType):  # type: ignore[type-arg]
    """A directory the command may create and write: refused at once (exit 2) when it, or a
    directory above it, is an existing file or cannot be written."""

    name = "directory"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Path:
        path = Path(value)
        for place in (path, *path.parents):
            if place.exists() and not place.is_dir():
                self.fail(f"{place} is a file, not a directory: give a directory to write the "
                          "report into (it is created when missing)", param, ctx)
            if place.exists():
                if not os.access(place, os.W_OK | os.X_OK):
                    self.fail(f"{place} cannot be written by this user: give a directory you "
                              "may write", param, ctx)
                break
        problem = _cannot_write(path)
        if problem is not None:
            self.fail(f"{path} cannot be written ({problem}): give a directory on a real, "
                      "writable filesystem (it is created when missing)", param, ctx)
        return path


def _cannot_write(directory: Path) -> str | None:
    """Why a file cannot be written in ``directory``, found by writing one (as root, access()
    says yes to /proc and /sys, where nothing can be made); what the probe made is removed."""
    made: list[Path] = []
    try:
        for place in reversed([directory, *directory.parents]):
            if not place.exists():
                place.mkdir()
                made.append(place)
        with tempfile.TemporaryFile(dir=directory, prefix=".idem-probe-") as probe:
            probe.write(b"idem-harness")
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        for place in reversed(made):
            with suppress(OSError):
                place.rmdir()
    return None


REPORT_DIR = _ReportDir()


def default_report_dir() -> Path:
    return Path("reports") / datetime.now().strftime("run-%Y%m%d-%H%M%S")

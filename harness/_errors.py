"""Every error the harness raises on purpose, in one tree.

    HarnessError                    something stopped the harness from judging the target
     ├── UsageError                 the caller asked for something impossible (bad flag, bad value)
     │    ├── TargetFileError       a target file is missing, malformed or inconsistent
     │    ├── RemoteTargetRefused   a non-loopback address without --allow-remote
     │    └── ReportNotWritten      the report directory cannot be written (full disk, /proc)
     ├── ServiceUnavailable         Toxiproxy, PostgreSQL or the target cannot be found or started
     └── ServiceError               a service answered, but not the way it must
          └── ToxiproxyError        the Toxiproxy API refused or failed a call

Findings (a duplicate charge, a wrong replay) are never exceptions: they are data the checker
returns.  An exception means the harness could not do its job, and its message says how to fix
that, because the person reading it is usually setting the harness up for the first time.
"""

from __future__ import annotations

__all__ = [
    "HarnessError",
    "RemoteTargetRefused",
    "ReportNotWritten",
    "ServiceError",
    "ServiceUnavailable",
    "TargetFileError",
    "ToxiproxyError",
    "UsageError",
]


class HarnessError(Exception):
    """Base of every error the harness raises deliberately."""


class UsageError(HarnessError):
    """The caller asked for something the harness cannot do as asked."""


class TargetFileError(UsageError):
    """A target file is unreadable or describes an impossible target.

    The message names the file, each field at fault and its fix, so the author can correct the
    file without reading the harness's source.  ``problems`` holds ``(field, problem, fix)``.
    """

    def __init__(self, path: str, problems: list[tuple[str, str, str]]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{path}: {len(problems)} problem(s) in the target file"]
        for field, problem, fix in problems:
            lines.append(f"  {field or '(file)'}: {problem}\n    fix: {fix}")
        super().__init__("\n".join(lines))


class RemoteTargetRefused(UsageError):
    """A target outside loopback was named without the explicit opt-in."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__(
            f"refusing to send traffic to {address}: it is not a loopback address.\n"
            "  fix: point the target at 127.0.0.1 or ::1, or pass --allow-remote if you own "
            "that host and mean to fault-inject it."
        )


class ReportNotWritten(UsageError):
    """A report file could not be written (the disk is full, the directory is read-only or not
    a real one): the run stops, since a run whose evidence cannot be kept proves nothing."""

    def __init__(self, directory: str, reason: str) -> None:
        self.directory = directory
        super().__init__(
            f"the report cannot be written to {directory}: {reason}; no report file was left "
            "half-written.\n  fix: free some space, or give another --report-dir (a directory "
            "you may write, on a real filesystem)")


class ServiceUnavailable(HarnessError):
    """A service the run needs could not be found or started.

    ``fix`` says how to provide it: the environment variable that points at a running instance,
    or the command that installs it.
    """

    def __init__(self, service: str, reason: str, fix: str) -> None:
        self.service = service
        self.reason = reason
        self.fix = fix
        super().__init__(f"{service} is unavailable: {reason}\n  fix: {fix}")


class ServiceError(HarnessError):
    """A service is up but answered a call with an error."""


class ToxiproxyError(ServiceError):
    """The Toxiproxy API refused or failed a call."""

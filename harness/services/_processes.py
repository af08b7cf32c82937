"""Child processes the harness starts, waits for, kills and restarts.

mirakuru does the process work (own process group, readiness polling, killing the whole tree);
this module adds what a fault-injection run needs on top: a log file per process instead of a
pipe nobody drains, a readiness check chosen by the caller, a deliberate SIGKILL that is not an
error, and one registry so nothing outlives the harness.
"""

from __future__ import annotations

import atexit
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from http.client import HTTPConnection, HTTPException
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

import psutil
from mirakuru import HTTPExecutor, TCPExecutor
from mirakuru.base import cleanup_subprocesses as _mirakurus_exit_handler
from mirakuru.exceptions import ExecutorError, ProcessExitedWithError, TimeoutExpired

from harness._errors import ServiceUnavailable
from harness.services._network import free_port, listening, port_taken

__all__ = ["ManagedProcess", "stop_all_processes", "stop_children_on_sigterm"]

_live: set[ManagedProcess] = set()
_live_lock = threading.Lock()


#: Ports tried for one service: another may take the one chosen before the service binds it.
PORT_CHOICES = 3
#: How long a killed service's port may stay open while the last processes of its group exit.
PORT_RELEASE_SECONDS = 10.0


def start_on_a_free_port(host: str, process_on: Callable[[int], ManagedProcess],
                         ) -> tuple[int, ManagedProcess]:
    """A service started on a port chosen free on ``host``, with ``process_on(port)``, and the
    port.  A port is chosen a moment before the service binds it, and another process (another
    test worker's service) may bind it in between: a start that fails while someone else holds
    its port is tried again on another (seen once in a full suite, a module's 12 tests lost)."""
    for _ in range(PORT_CHOICES - 1):
        port = free_port(host)
        try:
            return port, process_on(port).start()
        except ServiceUnavailable:
            if not port_taken(host, port):
                raise
    port = free_port(host)
    return port, process_on(port).start()


class _HTTPReady(HTTPExecutor):
    """mirakuru's HTTP readiness check, keeping the last answer in words (``GET /health
    answered 404 Not Found``): a start that timed out can then say what the path answered
    instead of only that it was not ready."""

    last_answer: str | None = None

    def after_start_check(self) -> bool:
        path = urlunsplit(("", "", self.url.path or "/", self.url.query, ""))
        connection = HTTPConnection(self.host, self.port, timeout=min(2.0, self._timeout or 2.0))
        try:
            connection.request(self.method, path)
            answer = connection.getresponse()
        except (TimeoutError, OSError, HTTPException) as exc:
            self.last_answer = f"GET {path} got no answer ({exc})"
            return False
        finally:
            connection.close()
        self.last_answer = f"GET {path} answered {answer.status} {answer.reason}, never 2xx"
        return 200 <= answer.status < 300


class ManagedProcess:
    """One long-running child: started, ready, and always stopped in the end.

    Readiness is either an HTTP URL answering 2xx (``ready_url``) or a TCP port accepting
    connections (``ready_port``).  Output goes to ``log_path`` so a failing start can be
    explained by the tail of the log.
    """

    def __init__(
        self,
        name: str,
        command: Sequence[str],
        *,
        log_path: Path,
        ready_url: str | None = None,
        ready_port: tuple[str, int] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        start_timeout: float = 30.0,
        ready_hint: str | None = None,
    ) -> None:
        """``ready_hint`` says which setting chose ``ready_url``, for a start whose URL kept
        answering something other than 2xx: then that setting, not the command, is the
        likelier fault."""
        if (ready_url is None) == (ready_port is None):
            raise ValueError("give exactly one of ready_url and ready_port")
        self.name = name
        self.command = list(command)
        self.log_path = log_path
        self._ready_url = ready_url
        self._ready_port = ready_port
        self._env = dict(env or {})
        self._cwd = cwd
        self._start_timeout = start_timeout
        self._ready_hint = ready_hint
        self._executor: TCPExecutor | None = None
        self._group: int | None = None
        self._leader_started: float | None = None
        self._log: IO[Any] | None = None

    @property
    def pid(self) -> int | None:
        if self._executor is None or self._executor.process is None:
            return None
        pid: int = self._executor.process.pid
        return pid

    def running(self) -> bool:
        return self._executor is not None and bool(self._executor.running())

    def start(self) -> ManagedProcess:
        """Start the process and return once it is ready, or raise ``ServiceUnavailable``."""
        self._end_group()  # what a previous run of it left behind, if it died by itself
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        common: dict[str, Any] = {
            "timeout": self._start_timeout,
            "sleep": 0.05,
            "envvars": self._env,
            "cwd": self._cwd,
            "stdin": subprocess.DEVNULL,
            "stdout": self._log,
            "stderr": subprocess.STDOUT,
        }
        if self._ready_url is not None:
            executor: TCPExecutor = _HTTPReady(
                self.command, url=self._ready_url, method="GET", **common
            )
        else:
            assert self._ready_port is not None
            host, port = self._ready_port
            executor = TCPExecutor(self.command, host=host, port=port, **common)
        try:
            executor.start()
        except (ExecutorError, OSError) as exc:
            self._executor = executor
            answered = (executor.last_answer if isinstance(executor, _HTTPReady)
                        and isinstance(exc, TimeoutExpired) else None)
            self.kill()
            by_hand = f"run the command by hand to see why: {shlex.join(self.command)}"
            why = _why_not_ready(exc, self._start_timeout)
            if answered is not None:
                why += f": {answered}"
            answered_http = answered is not None and " answered " in answered
            raise ServiceUnavailable(
                self.name, f"{why}; {self._output_said()}",
                f"{self._ready_hint}; or {by_hand}" if answered_http and self._ready_hint
                else by_hand,
            ) from exc
        except BaseException:  # Ctrl-C while it started: leave no process holding the port
            self._executor = executor
            self.kill()
            raise
        self._executor = executor
        self._group = executor.process.pid if executor.process else None  # mirakuru: setsid
        self._leader_started = _started_at(self._group)
        with _live_lock:
            _live.add(self)
        return self

    def stop(self) -> None:
        """Stop gracefully (SIGTERM to the process group, SIGKILL after the timeout)."""
        if self._executor is not None:
            # An exit with an error code still means stopped, which is all we asked for.
            with suppress(ExecutorError):
                self._executor.stop(expected_returncode=None)
        self._forget()

    def kill(self) -> None:
        """SIGKILL the whole process group now: a crash, not a shutdown."""
        if self._executor is not None:
            self._executor.kill(wait=True, sig=signal.SIGKILL)
        self._forget()

    def wait_exit(self, timeout: float) -> int | None:
        """Wait for the process to exit by itself (a crash the target chose); None if it did not."""
        if self._executor is None or self._executor.process is None:
            return None
        try:
            code: int = self._executor.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        self._forget()
        return code

    def _output_said(self) -> str:
        """The process's last words, inline: the log file may be removed with a run that was
        refused before it began."""
        tail = self.log_tail().strip()
        return f"its last output lines:\n{tail}" if tail else "it printed nothing"

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def _end_group(self) -> None:
        """SIGKILL what is left of the process's group.  A process that dies by itself (a crash
        of the target's own making) leaves the helpers it started, such as the examples' Redis,
        running in its group, where stopping the (already dead) process no longer reaches them."""
        if self._group is not None and self._group_is_ours():
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(self._group, signal.SIGKILL)
            self._wait_until_port_closed()
        self._group = None

    def _wait_until_port_closed(self) -> None:
        """Return once nothing listens where the process was ready any more (or after
        ``PORT_RELEASE_SECONDS``).  mirakuru waits for the group's leader only, and a child still
        exiting (a gunicorn worker: the kernel frees a dying process's memory before its
        sockets) keeps the port open, so a start at once would take the service for already
        running (django-idempotency-key's crash and restart, seen under CI)."""
        if self._ready_port is not None:
            host, port = self._ready_port
        else:
            assert self._ready_url is not None
            parts = urlsplit(self._ready_url)
            host, port = parts.hostname or "127.0.0.1", parts.port or 80
        deadline = time.monotonic() + PORT_RELEASE_SECONDS
        while listening(host, port) and time.monotonic() < deadline:
            time.sleep(0.02)

    def _group_is_ours(self) -> bool:
        """Does the group's number still name our group?  Linux keeps a group's number while
        any member lives, so it passes to another process only once all of ours are gone; a
        process holding it now that started at another time than our leader is someone
        else's (process numbers wrap within minutes on a busy machine: 32768 here)."""
        assert self._group is not None
        holder = _started_at(self._group)
        return holder is None or holder == self._leader_started

    def _forget(self) -> None:
        self._end_group()
        self._executor = None
        if self._log is not None:
            self._log.close()
            self._log = None
        with _live_lock:
            _live.discard(self)

    def __enter__(self) -> ManagedProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<ManagedProcess {self.name} pid={self.pid}>"


def _started_at(pid: int | None) -> float | None:
    """When process ``pid`` started, or None if there is none."""
    if pid is None:
        return None
    try:
        return psutil.Process(pid).create_time()
    except psutil.NoSuchProcess:
        return None


def _why_not_ready(exc: BaseException, timeout: float) -> str:
    """The start failure in a person's words, not the executor's repr."""
    if isinstance(exc, ProcessExitedWithError):
        return f"the command exited with code {exc.exit_code} before it was ready"
    if isinstance(exc, TimeoutExpired):
        return f"it was not ready within {timeout:g} s"
    return f"it could not be started ({exc})"


def stop_children_on_sigterm() -> None:
    """Turn SIGTERM into ``SystemExit`` so ``finally`` blocks and exit handlers stop every child.

    By default SIGTERM ends Python without running them, and the children (Toxiproxy, target
    processes, PostgreSQL) would outlive the harness.  Call it from the main thread.
    """

    def exit_cleanly(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, exit_cleanly)


def stop_all_processes() -> None:
    """Stop every process still registered; called at exit so no child outlives the harness."""
    with _live_lock:
        remaining = list(_live)
    for process in remaining:
        process.kill()


atexit.register(stop_all_processes)
# mirakuru's own exit handler kills every process whose mirakuru marker ("<pid>:<uuid4>")
# merely *contains* this process's number as text: a harness process numbered 424 would kill a
# broker started by process 4242, or by anyone else who uses mirakuru on the machine.
# ``stop_all_processes`` stops exactly our own children instead.
atexit.unregister(_mirakurus_exit_handler)

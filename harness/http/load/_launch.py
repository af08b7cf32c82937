"""Starting the Locust processes of a load run, hearing when the load starts, and waiting for them.

The processes are ``python -c BOOTSTRAP``: the bootstrap imports ``locust`` before anything else,
because Locust's gevent patching breaks ``ssl`` if ``ssl`` was imported first (the reason is
spelled out in ``harness/http/load/_process.py``).  They talk to this process only through files in
the work directory (the plan in; histories, ``nodes.json`` and logs out) and a few JSON lines on
the stats process's stdout: a master says it listens (then its workers are started), and the
statistics process says when the load began.
"""

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

from harness._errors import ServiceError, UsageError
from harness.http.load._plan import (
    CONNECT_TIMEOUT,
    EXIT_INCOMPLETE,
    EXIT_NO_WORKERS,
    NODES_FILE,
    LoadPlan,
)
from harness.services._network import require_loopback

__all__ = ["BOOTSTRAP", "LocustProcesses", "run_worker_process"]

BOOTSTRAP = (
    "import locust  # first of all: gevent must patch the standard library before ssl loads\n"
    "from harness.http.load._process import main\n"
    "raise SystemExit(main())\n"
)
#: Locust's import, the workers' connections and the first spawn all happen within this.
START_TIMEOUT = 120.0
#: After the statistics process has finished, the workers have this long to quit.
WORKER_EXIT_TIMEOUT = 30.0
_EXIT_MEANINGS = {EXIT_NO_WORKERS: "its workers did not connect",
                  EXIT_INCOMPLETE: "not every node sent its history"}


class _Child:
    def __init__(self, role: str, node: str, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.role = role
        self.node = node
        self.popen = popen
        self.log = log

    @property
    def label(self) -> str:
        return f"Locust {self.role}" + (f" {self.node}" if self.node else "")

    def failure(self, detail: str) -> ServiceError:
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        return ServiceError(f"the {self.label} process {detail}; last lines of {self.log}:\n"
                            f"{tail}")


class LocustProcesses:
    """The local runner, or a master and its workers, for one plan."""

    def __init__(self, plan: LoadPlan, plan_path: Path) -> None:
        self.plan = plan
        self.plan_path = plan_path
        self.work_dir = Path(plan.work_dir)
        self._children: list[_Child] = []

    def start(self, *, listening: Callable[[], None] | None = None) -> float:
        """Start every process and return the wall-clock time at which the load began;
        ``listening`` is called once a master listens (to tell a person to start the workers
        of other machines)."""
        plan = self.plan
        if plan.workers:
            self._spawn("master", "")
            self._message(self._children[0], "listening", START_TIMEOUT)
            if listening is not None:
                listening()
            if not plan.remote_workers:
                for number in range(1, plan.workers + 1):
                    self._spawn("worker", f"worker{number}")
        else:
            self._spawn("local", "")
        wait = START_TIMEOUT + (plan.worker_wait if plan.workers else 0.0)
        return float(self._message(self._children[0], "started_at", wait))

    def _spawn(self, role: str, label: str) -> None:
        log = self.work_dir / f"locust-{label or role}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-c", BOOTSTRAP, "--role", role]
        if role == "worker":
            command += ["--master", f"{self.plan.master_host}:{self.plan.master_port}"]
        else:
            command += ["--plan", str(self.plan_path)]
        with log.open("wb") as handle:
            stdout: IO[Any] | int = subprocess.PIPE if not self._children else handle
            popen = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=stdout,
                                     stderr=handle)
        self._children.append(_Child(role, label, popen, log))

    def _message(self, child: _Child, field: str, timeout: float) -> Any:
        """The next line ``child`` says on stdout, which must carry ``field``."""
        stream = child.popen.stdout
        assert stream is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stream, selectors.EVENT_READ)
            if not selector.select(timeout):
                raise child.failure(f"did not say {field!r} within {timeout:.0f}s")
        line = stream.readline().decode(errors="replace").strip()
        if not line:
            child.popen.wait(timeout=10)
            raise child.failure(f"ended before the load started (exit {child.popen.returncode})")
        try:
            return json.loads(line)[field]
        except (ValueError, KeyError, TypeError) as exc:
            raise child.failure(f"said {line!r} where {field!r} was expected") from exc

    def wait(self, timeout: float) -> dict[str, Any]:
        """Wait for the run to end; return ``nodes.json``, what the nodes reported."""
        stats, *workers = self._children
        try:
            code = stats.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise stats.failure(f"was still running {timeout:.0f}s after the load "
                                "started") from None
        deadline = time.monotonic() + WORKER_EXIT_TIMEOUT
        for worker in workers:
            with suppress(subprocess.TimeoutExpired):
                worker.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
        if code != 0:
            meaning = _EXIT_MEANINGS.get(code, "failed")
            raise stats.failure(f"ended with exit code {code} ({meaning})")
        nodes_path = self.work_dir / NODES_FILE
        try:
            summary: dict[str, Any] = json.loads(nodes_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise stats.failure(f"left no readable {nodes_path}") from exc
        return summary

    def stop_early(self) -> None:
        """Ask the statistics process to end the load now, as its duration would (it may have
        had the terminal's Ctrl-C already: once is enough)."""
        if self._children and self._children[0].popen.poll() is None:
            self._children[0].popen.send_signal(signal.SIGINT)

    def close(self) -> None:
        """Stop whatever is still running (a failed or interrupted run)."""
        for child in self._children:
            if child.popen.poll() is None:
                child.popen.terminate()
        for child in self._children:
            try:
                child.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.popen.kill()
                child.popen.wait(timeout=10)
            if child.popen.stdout is not None:
                child.popen.stdout.close()
        self._children = []


def run_worker_process(master: str, *, allow_remote: bool,
                       connect_timeout: float = CONNECT_TIMEOUT) -> int:
    """``idem-harness load --worker``: a Locust worker on this machine for the master at
    ``master`` (HOST:PORT), which sends it the plan; its log goes to this terminal.  Returns the
    worker's exit code once the master has ended the run, or 2 when no master answered within
    ``connect_timeout`` seconds."""
    host, _, port = master.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--master {master!r}: write HOST:PORT, the address the master "
                         "printed (for example 10.0.0.5:5557)")
    require_loopback(host.strip("[]"), allow_remote=allow_remote)
    worker = subprocess.Popen([sys.executable, "-c", BOOTSTRAP, "--role", "worker",
                               "--master", master, "--connect-timeout", str(connect_timeout)],
                              stdin=subprocess.DEVNULL)
    try:
        return worker.wait()
    finally:
        if worker.poll() is None:
            worker.terminate()
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

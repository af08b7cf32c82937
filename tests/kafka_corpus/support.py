"""The Kafka corpus consumers as processes: how each starts, and its events feed and effects.

Each consumer is started by its own ``start.sh`` as a team would run it, with the broker's
address of a proxied link, a topic, a group, a dead-letter topic, its store in the test's work
directory and a port for its feed (``GET /events?after=N``, ``GET /effects?key=K``).  The feeds
answer at once (no long poll), so waits look every 50 ms, bounded in time.
"""

from __future__ import annotations

import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.services._network import free_port
from harness.services._processes import ManagedProcess

__all__ = ["CONSUMERS", "FLAWS", "TARGETS", "CorpusProcess", "Flaw", "installed"]

HERE = Path(__file__).resolve().parent
SESSION_MS = "2000"  # a killed member's partitions move on within seconds
Event = dict[str, Any]


@dataclass(frozen=True)
class Flaw:
    consumer: str
    name: str
    drive: str
    properties: tuple[str, ...]
    #: The catalog scenario that shows the flaw through the harness.
    scenario: str = ""


FLAWS = [Flaw(f["consumer"], f["name"], f["drive"], tuple(f["properties"]), f["scenario"])
         for f in tomllib.loads((HERE / "flaws.toml").read_text())["flaw"]]
TARGETS = HERE / "targets"

#: Each consumer's store argument (SQLite file or Redis in the work directory), and whether its
#: start script takes the work directory (the Redis ones run a Redis of their own there).
CONSUMERS: dict[str, tuple[str, bool]] = {
    "confluent_inbox": ("--db", False),
    "aiokafka_redis": ("", True),
    "kafkajs_redis": ("", True),
    "franz_inbox": ("--db", False),
}

#: What ``install-all`` leaves behind for each consumer: the stamp of its environment.
_STAMPS = {"confluent_inbox": ".venv/.installed", "aiokafka_redis": ".venv/.installed",
           "kafkajs_redis": "node_modules/.installed", "franz_inbox": ".bin/.installed"}


def installed(name: str) -> bool:
    return (HERE / "consumers" / name / _STAMPS[name]).is_file()


class CorpusProcess:
    """One corpus consumer process; ``restart`` starts it again on the same port and store."""

    def __init__(self, name: str, *, bootstrap: str, topic: str, group: str, workdir: Path,
                 flaw: str | None = None) -> None:
        self.name = name
        self.port = free_port()
        directory = HERE / "consumers" / name
        store_option, takes_workdir = CONSUMERS[name]
        command = ["bash", str(directory / "start.sh")]
        if name != "franz_inbox":
            command.append(sys.executable)
        if takes_workdir:
            command.append(str(workdir))
        command += ["--bootstrap", bootstrap, "--topic", topic, "--group", group,
                    "--dlt", f"{topic}.dead", "--port", str(self.port),
                    "--session-timeout-ms", SESSION_MS]
        if store_option:
            command += [store_option, str(workdir / f"{name}.sqlite3")]
        if flaw is not None:
            command += ["--flaw", flaw]
        self._process = ManagedProcess(
            f"{name} {topic}", command, log_path=workdir / f"{name}-{self.port}.log",
            ready_url=f"http://127.0.0.1:{self.port}/health", cwd=str(directory),
            start_timeout=120.0)

    def start(self) -> CorpusProcess:
        self._process.start()
        return self

    def kill(self) -> None:
        self._process.kill()

    def log(self) -> str:
        return self._process.log_tail(30)

    def events(self) -> list[Event]:
        answer = httpx.get(f"http://127.0.0.1:{self.port}/events", params={"after": 0},
                           timeout=10).json()
        events: list[Event] = answer["events"]
        return events

    def count(self, predicate: Callable[[Event], bool]) -> int:
        return sum(1 for event in self.events() if predicate(event))

    def wait_for(self, what: str, predicate: Callable[[Event], bool], *,
                 timeout: float = 30.0) -> Event:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for event in self.events():
                if predicate(event):
                    return event
            time.sleep(0.05)
        raise AssertionError(f"{self.name}: no {what} within {timeout:g} s; its log:\n"
                             f"{self.log()}\nits events: {self.events()[-10:]}")

    def effects(self, key: str) -> int:
        count: int = httpx.get(f"http://127.0.0.1:{self.port}/effects", params={"key": key},
                               timeout=10).json()["count"]
        return count


"""The three things a Locust process can be: a local runner, a master, or a worker.

Locust is driven as a library (``Environment`` and its runners, as in Locust's
``examples/use_as_lib.py``), never through its command line.  The process that keeps the
statistics (local or master) says when the load starts with one JSON line on stdout, the load
command's signal to start the chaos (a master first says that it listens, so that its workers
are started only then); everything after that goes to the log.  A run ends when the
duration is up: users stop at once, their charges finish their retries (see ``LoadNode``), each
node sends its history, and Locust's own files are written.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment
from locust.event import Events
from locust.runners import Runner

from harness.load._node import HISTORY_MESSAGE, LoadNode
from harness.load._outputs import HistoryCollector, LocustFiles
from harness.load._plan import EXIT_INCOMPLETE, EXIT_NO_WORKERS, LoadPlan
from harness.load._users import charge_user_class

__all__ = ["LOOPBACK", "run_stats", "run_worker"]

LOOPBACK = "127.0.0.1"
#: How long a master waits for its workers to connect.
WORKER_CONNECT_TIMEOUT = 60.0


def run_stats(plan: LoadPlan) -> int:
    """The local runner (``plan.workers == 0``) or the master: start, run, stop, collect."""
    distributed = plan.workers > 0
    events = Events()  # type: ignore[no-untyped-call]
    node = None if distributed else LoadNode(plan, "", events)
    environment = Environment(user_classes=[charge_user_class(node)], events=events,
                              stop_timeout=0.0)
    if distributed:
        assert plan.master_port is not None
        connected = _count_workers(events, plan.workers)
        runner: Runner = environment.create_master_runner(LOOPBACK, plan.master_port)
        _say({"listening": plan.master_port})  # workers that connect earlier wait 5 s more
        if not connected.wait(WORKER_CONNECT_TIMEOUT):
            print(f"error: {plan.workers} worker(s) did not connect to {LOOPBACK}:"
                  f"{plan.master_port} within {WORKER_CONNECT_TIMEOUT:.0f}s", file=sys.stderr)
            runner.quit()
            return EXIT_NO_WORKERS
    else:
        runner = environment.create_local_runner()
    collector = HistoryCollector(Path(plan.work_dir), expected=max(plan.workers, 1))
    runner.register_message(HISTORY_MESSAGE, collector.receive)
    if node is not None:
        events.test_stop.add_listener(lambda **_: node.ship(runner))  # type: ignore[no-untyped-call]
    files = LocustFiles(environment, Path(plan.report_dir))

    cpu_origin = time.process_time()
    started_at = _announce_start()
    spawning = gevent.spawn(runner.start, plan.users, spawn_rate=plan.spawn_rate)
    gevent.sleep(plan.duration)
    spawning.kill()
    runner.stop()
    complete = collector.wait(plan.drain_timeout + 30.0)
    files.finish()
    spent = time.process_time() - cpu_origin
    if not distributed:  # the node counted its own part; the rest (its statistics, the files)
        spent = max(0.0, spent - sum(float(n["cpu_seconds"]) for n in collector.nodes))
    collector.write_summary(
        started_at=started_at,
        stats_cpu_seconds=spent,
        user_exceptions=sum(int(row["count"]) for row in runner.exceptions.values()),
    )
    runner.quit()
    return 0 if complete else EXIT_INCOMPLETE


def run_worker(plan: LoadPlan, name: str) -> int:
    """A worker: connects to the master, runs the users it is given, sends its history."""
    assert plan.master_port is not None
    events = Events()  # type: ignore[no-untyped-call]
    node = LoadNode(plan, name, events)
    environment = Environment(user_classes=[charge_user_class(node)], events=events)
    runner = environment.create_worker_runner(LOOPBACK, plan.master_port)
    events.test_stop.add_listener(lambda **_: node.ship(runner))  # type: ignore[no-untyped-call]
    runner.greenlet.join()
    return 0


def _count_workers(events: Events, wanted: int) -> gevent.event.Event:
    """An event set once ``wanted`` distinct workers have connected."""
    seen: set[str] = set()
    ready = gevent.event.Event()

    def on_connect(client_id: str, **_: Any) -> None:
        seen.add(client_id)
        if len(seen) >= wanted:
            ready.set()

    events.worker_connect.add_listener(on_connect)  # type: ignore[no-untyped-call]
    return ready


def _say(message: dict[str, Any]) -> None:
    """One line to the load command, on stdout."""
    print(json.dumps(message), flush=True)


def _announce_start() -> float:
    """Tell the load command the load starts now, then send stdout to the log with stderr."""
    started_at = time.time()
    _say({"started_at": started_at})
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return started_at

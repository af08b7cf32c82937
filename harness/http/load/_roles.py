"""The three things a Locust process can be: a local runner, a master, or a worker.

Locust is driven as a library (``Environment`` and its runners, as in Locust's
``examples/use_as_lib.py``), never through its command line.  The process that keeps the
statistics (local or master) says when the load starts with one JSON line on stdout, the load
command's signal to start the chaos (a master first says that it listens, so that its workers
are started only then); everything after that goes to the log.  Each worker asks its master for
the plan once it is connected (a message sent on connection could arrive before the worker
listens for it), and the master answers with the plan and the worker's name in the history
(``w1``, ``w2``... in the order they ask), through Locust's own messages, so a worker on another
machine needs nothing but the master's address.  A run ends when the duration is up: users
stop at once, their charges finish their retries (see ``LoadNode``), each node sends its
history, and Locust's own files are written.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust import runners
from locust.env import Environment
from locust.event import Events
from locust.rpc import Message
from locust.runners import Runner

from harness.http.load._node import HISTORY_MESSAGE, LoadNode
from harness.http.load._outputs import HistoryCollector, LocustFiles
from harness.http.load._plan import (
    CONNECT_TIMEOUT,
    EXIT_INCOMPLETE,
    EXIT_NO_MASTER,
    EXIT_NO_WORKERS,
    LoadPlan,
)
from harness.http.load._users import charge_user_class

__all__ = ["PLAN_MESSAGE", "run_stats", "run_worker"]

PLAN_REQUEST = "idem-plan-please"
PLAN_MESSAGE = "idem-plan"


def run_stats(plan: LoadPlan) -> int:
    """The local runner (``plan.workers == 0``) or the master: start, run, stop, collect."""
    distributed = plan.workers > 0
    events = Events()  # type: ignore[no-untyped-call]
    node = None if distributed else LoadNode(plan, "", events)
    environment = Environment(user_classes=[charge_user_class(lambda: node)], events=events,
                              stop_timeout=0.0)
    if distributed:
        assert plan.master_port is not None
        runner: Runner = environment.create_master_runner(plan.master_host, plan.master_port)
        connected = _hand_out_plans(runner, plan)
        _say({"listening": plan.master_port})  # workers that connect earlier wait 5 s more
        if not connected.wait(plan.worker_wait):
            print(f"error: {plan.workers} worker(s) did not connect to {plan.master_host}:"
                  f"{plan.master_port} and ask for the plan within {plan.worker_wait:.0f}s",
                  file=sys.stderr)
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
    stopping = _stop_early_on_signals()
    spawning = gevent.spawn(runner.start, plan.users, spawn_rate=plan.spawn_rate)
    stopping.wait(timeout=plan.duration)
    stopped_early = stopping.is_set()
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
        stopped_early=stopped_early,
    )
    runner.quit()
    return 0 if complete else EXIT_INCOMPLETE


def _stop_early_on_signals() -> gevent.event.Event:
    """Ctrl-C (or SIGTERM) stops the load early, as its end would: the users stop, their
    charges finish their retries, every node sends its history, the files are written.  The
    terminal sends Ctrl-C to this process as well as to the load command, which then writes its
    report, marked incomplete; a second one ends the command without one."""
    stopping = gevent.event.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(signum, stopping.set)
    return stopping


def run_worker(host: str, port: int, *, connect_timeout: float = CONNECT_TIMEOUT) -> int:
    """A worker: connects to the master at ``host:port`` (giving up after ``connect_timeout``
    seconds, exit 2), takes the plan it sends, runs the users it is given, sends its history
    back."""
    # Ctrl-C reaches the whole terminal's process group: a worker keeps going until its master
    # stops the run (which then collects its history); the command that started it stops it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    events = Events()  # type: ignore[no-untyped-call]
    nodes: list[LoadNode] = []
    environment = Environment(user_classes=[charge_user_class(lambda: nodes[0] if nodes else None)],
                              events=events)
    # Locust retries for 60 x 5 s before it gives up; its loop reads these module constants.
    runners.CONNECT_TIMEOUT = wait = max(1, min(5, math.ceil(connect_timeout)))
    runners.CONNECT_RETRY_COUNT = math.ceil(connect_timeout / wait) - 1
    try:
        runner = environment.create_worker_runner(host, port)
    except ConnectionError:
        print(f"error: no Locust master answered at {host}:{port} within {connect_timeout:g}s\n"
              "  fix: start the load with --workers N --listen HOST:PORT on the master's machine "
              "first, give --master the address it prints, check that this machine reaches it, "
              "or wait longer with --connect-timeout", file=sys.stderr, flush=True)
        return EXIT_NO_MASTER

    def take_plan(environment: Environment, msg: Message, **_: Any) -> None:
        if not nodes:
            plan = LoadPlan.from_json(str(msg.data["plan"]))
            nodes.append(LoadNode(plan, str(msg.data["node"]), events))
            print(f"worker {msg.data['node']}: plan of run {plan.run_id} received from "
                  f"{host}:{port}", file=sys.stderr, flush=True)

    runner.register_message(PLAN_MESSAGE, take_plan)
    events.test_stop.add_listener(  # type: ignore[no-untyped-call]
        lambda **_: nodes[0].ship(runner) if nodes else None)
    runner.send_message(PLAN_REQUEST)
    runner.greenlet.join()
    return 0


def _hand_out_plans(runner: Runner, plan: LoadPlan) -> gevent.event.Event:
    """Answer each worker's request for the plan, with its name; the event is set once
    ``plan``'s number of workers have it."""
    names: dict[str, str] = {}
    ready = gevent.event.Event()
    text = plan.to_json()

    def on_request(environment: Environment, msg: Message, **_: Any) -> None:
        client_id = str(msg.node_id)
        if client_id not in names:
            if len(names) >= plan.workers:  # its users would run without a plan: say so
                print(f"warning: a worker beyond the {plan.workers} expected asked for the "
                      f"plan ({client_id}); it gets none", file=sys.stderr, flush=True)
                return
            names[client_id] = f"w{len(names) + 1}"
        runner.send_message(PLAN_MESSAGE, {"plan": text, "node": names[client_id]},
                            client_id=client_id)
        if len(names) >= plan.workers:
            ready.set()

    runner.register_message(PLAN_REQUEST, on_request)
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

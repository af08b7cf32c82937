"""The service code leaves nothing running, even when the program using it fails."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness._profiles import in_ci
from harness.services._network import free_port
from harness.services._processes import ManagedProcess

#: Starts RabbitMQ (its node and its own EPMD) in a thread while PostgreSQL starts, so the
#: broker's boot adds little to the test's time, and prints what each service left listening.
START_ALL = textwrap.dedent(
    """
    import json, threading
    from harness._errors import ServiceUnavailable
    from harness.services._postgres import start_postgres
    from harness.services._rabbitmq import start_rabbitmq
    from harness.services._toxiproxy import start_toxiproxy

    def started_services():
        started = {}

        def rabbitmq():
            try:
                node = start_rabbitmq()._stopper
                started["rabbitmq"] = {"ports": [node.amqp_port, node.dist_port,
                                                 node.epmd_port],
                                       "node": node.name, "root": str(node.root)}
            except ServiceUnavailable as exc:
                started["rabbitmq_error"] = str(exc)

        broker = threading.Thread(target=rabbitmq)
        broker.start()
        try:
            started["toxiproxy"] = start_toxiproxy().pid
        except ServiceUnavailable as exc:
            started["toxiproxy_error"] = str(exc)
        try:
            started["postgres_port"] = start_postgres().port
        except ServiceUnavailable as exc:
            started["postgres_error"] = str(exc)
        broker.join()
        return started
    """
)

SCRIPT = START_ALL + textwrap.dedent(
    """
    print(json.dumps(started_services()), flush=True)
    raise SystemExit("failing on purpose with every service still open")
    """
)


def _listening_ports() -> set[int]:
    return {c.laddr.port for c in psutil.net_connections("tcp")
            if c.status == "LISTEN" and isinstance(c.laddr, tuple) and c.laddr}


def _assert_rabbitmq_gone(started: dict[str, Any]) -> None:
    """The node, its EPMD and its directory are gone: no port it listened on (AMQP, Erlang
    distribution, EPMD), no process named after the node, no data left."""
    rabbitmq = started["rabbitmq"]
    assert not set(rabbitmq["ports"]) & _listening_ports(), rabbitmq
    epmd_port = str(rabbitmq["ports"][2])
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        assert rabbitmq["node"] not in " ".join(cmdline), cmdline
        assert not (cmdline[:1] == ["epmd"] and epmd_port in cmdline), cmdline
    assert not Path(rabbitmq["root"]).exists()


def test_a_failing_program_leaves_no_service_behind() -> None:
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert "failing on purpose" in result.stderr
    started = json.loads(result.stdout.splitlines()[-1])
    if in_ci():
        assert not {"toxiproxy_error", "postgres_error", "rabbitmq_error"} & set(started), started
    if "toxiproxy" in started:
        assert started["toxiproxy"] is not None
        assert not psutil.pid_exists(started["toxiproxy"])
    if "postgres_port" in started:
        assert started["postgres_port"] not in _listening_ports()
    if "rabbitmq" in started:
        _assert_rabbitmq_gone(started)
    assert {"toxiproxy", "postgres_port", "rabbitmq"} & set(started), started


SIGTERM_SCRIPT = START_ALL + textwrap.dedent(
    """
    import sys
    from harness.services._processes import stop_children_on_sigterm

    stop_children_on_sigterm()
    started = started_services()
    assert not {"toxiproxy_error", "postgres_error", "rabbitmq_error"} & set(started), started
    print(json.dumps(started), flush=True)
    sys.stdin.read()  # until the parent's SIGTERM
    """
)


def test_sigterm_stops_every_service_it_started() -> None:
    process = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    started = json.loads(process.stdout.readline())  # the services are up: now terminate it
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 128 + signal.SIGTERM
    assert not psutil.pid_exists(started["toxiproxy"])
    assert started["postgres_port"] not in _listening_ports()
    _assert_rabbitmq_gone(started)


REPOSITORY = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("front", ["run", "explore"])
def test_a_bench_stopped_by_sigterm_stops_what_it_started(front: str) -> None:
    """A bench killed by its supervisor (``timeout``, a CI step) left Toxiproxy and the target
    it was judging running; each bench's ``__main__`` now turns SIGTERM into an exit.  The
    detection bench stops as the CLI does: an exploration stopped by a ``SystemExit`` raised
    inside it had Hypothesis print a FlakyFailure traceback."""
    process = subprocess.Popen(
        [sys.executable, "-P", "bench/detection.py", "--only", "reference", "--target",
         "reference-server", "--front", front, "--correct-only"],
        cwd=REPOSITORY, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    bench = psutil.Process(process.pid)
    deadline = time.monotonic() + 60
    children: list[psutil.Process] = []
    while time.monotonic() < deadline and len(children) < 2:  # Toxiproxy and the target
        children = bench.children(recursive=True)
        time.sleep(0.1)
    assert len(children) >= 2, [c.cmdline() for c in children]
    process.send_signal(signal.SIGTERM)
    _, errors = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, errors
    assert "Traceback" not in errors and "interrupted by SIGTERM" in errors, errors
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, [c.cmdline() for c in alive]


#: A process that starts a helper in its own group (as the examples start Redis), writes the
#: helper's pid, and serves a port so that it can be seen to be ready.
LEADER = textwrap.dedent(
    """
    import socket, subprocess, sys
    helper = subprocess.Popen(["sleep", "600"])
    with open(sys.argv[1], "w") as out:
        out.write(str(helper.pid))
    server = socket.create_server(("127.0.0.1", int(sys.argv[2])))
    while True:
        server.accept()[0].close()
    """
)


def test_helpers_of_a_process_that_died_by_itself_do_not_outlive_it(tmp_path: Path) -> None:
    port = free_port()
    process = ManagedProcess(
        "leader", [sys.executable, "-c", LEADER, str(tmp_path / "helper"), str(port)],
        log_path=tmp_path / "leader.log", ready_port=("127.0.0.1", port))

    # mirakuru's executor kills its group when it is garbage-collected, which a reference cycle
    # can put off until the harness exits; keeping every executor alive shows what
    # ManagedProcess itself does.
    executors = []

    def start_then_die() -> psutil.Process:
        """Start it, then kill only the leader: its helper lives on in the group."""
        process.start()
        executors.append(process._executor)
        helper = psutil.Process(int((tmp_path / "helper").read_text()))
        assert process.pid is not None
        leader = psutil.Process(process.pid)
        leader.kill()
        leader.wait(timeout=10)
        assert helper.is_running()
        return helper

    helper = start_then_die()
    try:
        start_then_die()  # a restart begins by ending what the dead one left
        helper.wait(timeout=10)
        helper = psutil.Process(int((tmp_path / "helper").read_text()))
    finally:
        process.stop()  # stopping a dead process ends its helpers too
    helper.wait(timeout=10)


def test_a_group_number_taken_by_another_process_is_left_alone(tmp_path: Path) -> None:
    """Process numbers wrap on a busy machine: once a dead target's whole group is gone, its
    number may lead someone else's group, which ending "what the dead one left" must spare."""
    port = free_port()
    process = ManagedProcess(
        "leader", [sys.executable, "-c", LEADER, str(tmp_path / "helper"), str(port)],
        log_path=tmp_path / "leader.log", ready_port=("127.0.0.1", port))
    process.start()
    helper = psutil.Process(int((tmp_path / "helper").read_text()))
    process.kill()  # the whole group, helper included
    helper.wait(timeout=10)
    # Someone else's group, holding the number as it would after a wrap.
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True)
    try:
        process._group = stranger.pid
        process.start()  # begins by ending what the dead one left
        assert stranger.poll() is None, "another process's group was killed"
    finally:
        process.stop()
        stranger.kill()
        stranger.wait(timeout=10)


def test_a_harness_process_ending_spares_processes_it_did_not_start() -> None:
    """mirakuru's exit handler kills every process whose marker contains the exiting process's
    number as text; ours must not: here a stranger's marker holds the harness process's number
    inside a longer one (process 424 ending must spare process 4242's broker)."""
    harness = subprocess.Popen([sys.executable, "-c", "import sys, harness.services._processes; "
                                "sys.stdin.read()"], stdin=subprocess.PIPE, text=True)
    stranger = subprocess.Popen(["sleep", "60"], env={"mirakuru_uuid": f"9{harness.pid}9:x"})
    try:
        assert harness.stdin is not None
        harness.stdin.close()  # the harness process exits normally, running its exit handlers
        assert harness.wait(timeout=30) == 0
        assert stranger.poll() is None, "a process the harness did not start was killed"
    finally:
        stranger.kill()
        stranger.wait(timeout=10)


def test_the_detection_bench_loads_the_machine_beside_its_sweep_and_stops_it() -> None:
    """``--busy N`` (issue 38, item 6): N busy processes per core beside the sweep, each
    stopped when the bench ends, here by SIGTERM."""
    process = subprocess.Popen(
        [sys.executable, "-P", "bench/detection.py", "--only", "reference", "--target",
         "reference-server", "--front", "run", "--correct-only", "--busy", "1"],
        cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    bench = psutil.Process(process.pid)
    wanted = psutil.cpu_count() or 1
    deadline = time.monotonic() + 60
    spinners: list[psutil.Process] = []
    while time.monotonic() < deadline and len(spinners) < wanted:
        spinners = [c for c in bench.children()
                    if any("getppid" in part for part in c.cmdline())]
        time.sleep(0.1)
    assert len(spinners) == wanted, [c.cmdline() for c in bench.children()]
    process.send_signal(signal.SIGTERM)
    out, errors = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, errors
    assert f"1 busy process(es) per core beside it ({wanted} in all)" in out, out
    _, alive = psutil.wait_procs(spinners, timeout=10)
    assert not alive, [c.cmdline() for c in alive]

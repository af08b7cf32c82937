"""Workers on other machines (issue 17, part 4), for real: two network namespaces the test makes
itself, joined by a veth pair with private addresses that exist only inside them.

The master (the load command, its Toxiproxy and the reference server) runs in one namespace and
listens on 10.123.0.1; a worker started with ``load --worker --master 10.123.0.1:PORT`` runs in
the other, receives the plan from the master over Locust's connection (no shared file), sends
its charges through the master's proxies across the veth pair, and ships its history back.
Where namespaces cannot be made (no root, no ``ip``), the test skips, and fails under CI=true.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness._errors import RemoteTargetRefused
from harness.http.load import LoadConfig
from harness.targets._reference import reference_target
from tests.missing import missing

MASTER_IP, WORKER_IP = "10.123.0.1", "10.123.0.2"
PORT = 5557
HARNESS = [sys.executable, "-m", "harness.cli", "load"]


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def namespaces() -> Iterator[tuple[str, str]]:
    """Two namespaces, each with loopback up and one end of a veth pair; removed afterwards."""
    if shutil.which("ip") is None:
        missing("the `ip` command (iproute2) is needed to make network namespaces",
                kind="tool")
    tag = uuid.uuid4().hex[:6]
    master, worker = f"idem-m-{tag}", f"idem-w-{tag}"
    made: list[str] = []
    try:
        for name in (master, worker):
            done = _ip("netns", "add", name)
            if done.returncode != 0:
                missing(f"cannot make a network namespace (`ip netns add`: "
                        f"{done.stderr.strip()}); the test needs root", kind="capability")
            made.append(name)
        steps = [
            ("link", "add", f"vm{tag}", "type", "veth", "peer", "name", f"vw{tag}"),
            ("link", "set", f"vm{tag}", "netns", master),
            ("link", "set", f"vw{tag}", "netns", worker),
            ("-n", master, "addr", "add", f"{MASTER_IP}/24", "dev", f"vm{tag}"),
            ("-n", worker, "addr", "add", f"{WORKER_IP}/24", "dev", f"vw{tag}"),
            ("-n", master, "link", "set", f"vm{tag}", "up"),
            ("-n", worker, "link", "set", f"vw{tag}", "up"),
            ("-n", master, "link", "set", "lo", "up"),
            ("-n", worker, "link", "set", "lo", "up"),
        ]
        for step in steps:
            done = _ip(*step)
            if done.returncode != 0:
                missing(f"cannot wire the namespaces (`ip {' '.join(step)}`: "
                        f"{done.stderr.strip()})", kind="capability")
        yield master, worker
    finally:
        for name in made:
            _ip("netns", "delete", name)  # takes its end of the veth pair, and so the pair


def _inside(namespace: str, command: list[str]) -> list[str]:
    return ["ip", "netns", "exec", namespace, *command]


def test_a_worker_in_another_namespace_gets_the_plan_from_the_master(
        namespaces: tuple[str, str], tmp_path: Path) -> None:
    master_ns, worker_ns = namespaces
    # Services of the test session live in the first namespace's loopback, out of reach here.
    env = {k: v for k, v in os.environ.items() if k not in ("TOXIPROXY_URL", "IDEM_PG_DSN")}
    master = subprocess.Popen(
        _inside(master_ns, [*HARNESS, "--reference", "--users", "4", "--spawn-rate", "20",
                            "--duration", "2s", "--workers", "1", "--listen",
                            f"{MASTER_IP}:{PORT}", "--allow-remote", "--seed", "7",
                            "--report-dir", str(tmp_path)]),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = subprocess.Popen(
        _inside(worker_ns, [*HARNESS, "--worker", "--master", f"{MASTER_IP}:{PORT}",
                            "--allow-remote"]),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, master_err = master.communicate(timeout=150)
        _, worker_err = worker.communicate(timeout=60)
    finally:
        for process in (master, worker):
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert master.returncode == 0, master_err[-3000:] + "\nworker:\n" + worker_err[-3000:]
    assert worker.returncode == 0, worker_err[-3000:]
    assert f"--worker --master {MASTER_IP}:{PORT} --allow-remote" in master_err
    assert "plan of run" in worker_err and f"from {MASTER_IP}:{PORT}" in worker_err

    plan = json.loads((tmp_path / "work" / "plan.json").read_text())
    assert plan["remote_workers"] and all(url.startswith(f"http://{MASTER_IP}:")
                                          for url in plan["urls"])
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").open()]
    attempts = [e for e in history if e["f"] == "request" and e["type"] == "invoke"]
    assert attempts and {e["process"][:3] for e in attempts} == {"w1u"}
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "pass"


def test_a_remote_master_or_worker_needs_the_opt_in() -> None:
    done = subprocess.run([*HARNESS, "--worker", "--master", f"{MASTER_IP}:{PORT}"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--allow-remote" in done.stderr
    config = LoadConfig(target=reference_target(store=None, flaw=None), users=1, spawn_rate=1,
                        duration=1, report_dir=Path("unused"), workers=1,
                        listen=f"{MASTER_IP}:{PORT}")
    with pytest.raises(RemoteTargetRefused, match="--allow-remote"):
        config.validate()

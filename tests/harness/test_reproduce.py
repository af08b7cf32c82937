"""A finding's reproduction works after the run: a script in the report directory that starts
the target again, sends the finding's requests with every header (a crash hook's included), kills
and restarts it and moves its clock where the run did, and counts the effects."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from harness._findings import Finding
from harness._history import Event, History
from harness._reproduce import script_for
from harness._target import load_target
from tests.harness.test_run_cli import env, harness, results

__all__ = ["env"]


@pytest.mark.parametrize(("flaw", "scenario", "shows"), [
    ("split-commit", "crash-mid-request", ["X-Test-Fault: crash-after-work", "kill_target",
                                           "start_target", "/clock/advance"]),
    ("check-then-insert", "key-reuse", ["send_at_once", " --next "]),  # a racing pair, at once
])
def test_a_finding_replays_from_its_script_after_the_run(env: dict[str, str], tmp_path: Path,
                                                         flaw: str, scenario: str,
                                                         shows: list[str]) -> None:
    report = tmp_path / "run"
    done = harness(env, "run", "--reference", "--flaw", flaw, "--scenario", scenario,
                   "--report-dir", str(report), "--seed", "3")
    assert done.returncode == 1, done.stderr
    finding = next(f for s in results(report)["scenarios"] for f in s["findings"]
                   if f["property"] == "P1")
    command = finding["reproduce"].split()
    assert command[0] == "bash" and Path(command[1]).is_file()
    script = Path(command[1]).read_text()
    assert all(line in script for line in shows), script  # fault headers, kills, races
    assert os.access(command[1], os.X_OK)
    # The run is over and its port is gone: the script starts its own target and shows both.
    replay = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert replay.returncode == 0, replay.stderr
    counted = json.loads(replay.stdout.strip().splitlines()[-1])
    assert counted["count"] == 2, replay.stdout
    assert f"reproduce/{scenario}-" in (report / "index.html").read_text()


def test_requests_that_overlapped_are_sent_at_once_and_others_in_order() -> None:
    target = load_target("reference")
    history = History()

    def invoke(body: str) -> Event:
        return history.invoke("request", "c", key="k", tenant="t", method="POST",
                              path="/charges", body=body, key_header='"k"')

    first, second = invoke("{}"), invoke("{}")  # both in flight at once
    for invocation in (first, second):
        history.complete(invocation, "ok", status=201)
    history.complete(invoke('{"amount": 2}'), "ok", status=422)
    events = history.events()
    text = script_for(Finding("P1", "t/k", "two charges", tuple(e.index for e in events)),
                      events, target, scenario="key-reuse", seed=1, base_url="")
    lines = [line for line in text.splitlines() if line.startswith(("send ", "send_at_once "))]
    assert len(lines) == 2
    assert lines[0].startswith("send_at_once ") and lines[0].count(" --next ") == 1
    assert lines[1].startswith("send ") and "amount" in lines[1]
    assert "--data-urlencode tenant=t --data-urlencode key=k" in text

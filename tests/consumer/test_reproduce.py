"""A consumer finding's reproduction works after the run: a script in the report directory plays
the scenario again through the harness (publishes, held acks, cut connections) against fresh
consumers started from the target the script carries, and says whether the property broke."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

from harness._history import History
from harness.consumer._reproduce import consumer_script
from harness.consumer._target import ConsumerTarget
from harness.judging._findings import Finding
from harness.targets._loader import load_target, parse_target, saved_target

EXAMPLES = Path(__file__).parents[2] / "examples" / "targets"


def idem(*args: str, broker: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                          text=True, timeout=240, env={**os.environ, "IDEM_AMQP_URL": broker})


def test_a_consumer_finding_replays_from_its_script_after_the_run(broker: str,
                                                                  tmp_path: Path) -> None:
    report = tmp_path / "run"
    done = idem("run", "--reference-consumer", "--flaw", "no-dedup", "--scenario", "lost-ack",
                "--seed", "3", "--report-dir", str(report), "--quiet", broker=broker)
    assert done.returncode == 1, done.stderr
    scenarios = json.loads((report / "results.json").read_text())["scenarios"]
    finding = next(f for s in scenarios for f in s["findings"] if f["property"] == "P1")
    command = finding["reproduce"].split()
    assert command == ["bash", str(report / "reproduce" / "lost-ack-1.sh")]
    assert os.access(command[1], os.X_OK)
    script = Path(command[1]).read_text()
    assert "reproduce/lost-ack-1.sh" in (report / "index.html").read_text()

    # The run is over, its consumers and proxies gone; the script starts everything again,
    # and leaves no temporary directory behind.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    replay = subprocess.run(command, capture_output=True, text=True, timeout=240,
                            env={**os.environ, "IDEM_AMQP_URL": broker, "TMPDIR": str(scratch)})
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "reproduced: P1 broke again in lost-ack" in replay.stdout
    assert list(scratch.iterdir()) == []

    # The target is the script's own: without the flaw in it, the same replay holds (the
    # broker given as the script's argument this time).
    fixed = tmp_path / "fixed.sh"
    fixed.write_text(script.replace(', "--flaw", "no-dedup"', ""))
    assert fixed.read_text() != script
    replay = subprocess.run(["bash", str(fixed), broker], capture_output=True, text=True,
                            timeout=240, env={k: v for k, v in os.environ.items()
                                              if k != "IDEM_AMQP_URL"})
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "not reproduced this time: lost-ack came out pass" in replay.stdout


def test_the_script_carries_the_target_as_the_run_used_it() -> None:
    """Only what the file set (defaults stay defaults, so the file validates again), and a start
    directory relative to the target file made absolute: the script's copy lives elsewhere."""
    target = load_target(EXAMPLES / "celery-charges.toml")
    assert isinstance(target, ConsumerTarget)
    script = consumer_script(Finding("P1", None, "two charges"), History().events(), target,
                             scenario="lost-ack", seed=9)
    carried = script.split("<<'IDEM_TARGET'\n", 1)[1].split("\nIDEM_TARGET\n", 1)[0]
    data = tomllib.loads(carried)
    assert data["start"]["cwd"] == str((EXAMPLES / "celery-charges").absolute())
    assert "endpoint" not in data and "key" not in data  # HTTP tables a consumer must not have
    assert "--scenario lost-ack --seed 9" in script


def test_a_target_read_back_from_a_saved_run_is_carried_so_that_it_loads_again() -> None:
    """`check --write-to` rebuilds the scripts from results.json, whose target has every field
    set (nulls and the HTTP tables' defaults among them): the carried file must load as the
    same consumer target, or the page and the scripts are not written at all."""
    original = load_target(EXAMPLES / "celery-charges.toml")
    assert isinstance(original, ConsumerTarget)
    saved = saved_target(original.model_dump(mode="json", exclude={"source"}),
                         source=original.source)
    script = consumer_script(Finding("P1", None, "two charges"), History().events(), saved,
                             scenario="lost-ack", seed=9)
    carried = script.split("<<'IDEM_TARGET'\n", 1)[1].split("\nIDEM_TARGET\n", 1)[0]
    again = parse_target(tomllib.loads(carried), source=str(EXAMPLES / "x.toml"))
    assert isinstance(again, ConsumerTarget)
    assert again.start.cwd == str((EXAMPLES / "celery-charges").absolute())
    same = {"source": True, "start": {"cwd"}}
    assert again.model_dump(exclude=same) == original.model_dump(exclude=same)

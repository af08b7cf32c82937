"""A finding's reproduction works after the run: the script in the report directory plays its
key's story again through the harness (a slow original in the background, so the retry, the
clock jump or the kill meets it; faults, crashes and restarts where the run made them) against a
fresh instance started as the run started it, judges it, and exits 1 when the finding broke
again, 0 when it did not this time, 2 when it could not be played.  Each is tried on a real
flawed reference server through the real CLI, then with the flaw taken out of the script."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from harness._history import Event, History
from harness.http.reproduction._replay import _plan, _Send
from harness.http.reproduction._reproduction import Reproduction
from harness.services._network import free_port
from harness.services._processes import ManagedProcess
from harness.targets._loader import load_target
from harness.targets._reference import reference_target
from tests.harness.test_run_cli import env, harness, results

__all__ = ["env"]


def _scripts(report: Path) -> dict[str, str]:
    """Each reproduce line of the run, by the properties of its findings."""
    lines: dict[str, str] = {}
    for scenario in results(report)["scenarios"]:
        for finding in scenario["findings"]:
            lines.setdefault(finding["reproduce"], "")
            lines[finding["reproduce"]] += finding["property"]
    return lines


def _play(script: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True, env=env,
                          timeout=300)


#: What the script says against the correct server: the finding is gone.
GONE = (0, "not reproduced this time: {scenario} came out pass")


@pytest.mark.parametrize(("flaw", "scenario", "extra", "shows", "fixed"), [
    # the slow original past its lease, the clock jump, the retry that takes over; PostgreSQL
    ("no-fencing", "zombie-original", ["--postgres"], ["X-Test-Delay-Ms: 1200", " &\n",
                                                      "the target's clock moved"], GONE),
    # the crash hook after the work, the restart, the retries
    ("split-commit", "crash-mid-request", [], ["X-Test-Fault: crash-after-work",
                                               "the target crashed by itself",
                                               "the target was started again"], GONE),
    # copies released together, a race the flawed claim loses
    ("check-then-insert", "concurrent-retries", [], [" &\n"], GONE),
    # the store proxy cuts the link right after a committed write; the correct server makes
    # one write where split-commit makes two, so the strike at the second cannot be played:
    # no verdict, said as such, rather than a pass
    ("split-commit", "cut-after-commit", ["--postgres"], ["the target's write 2",
                                                          "the harness's store proxy"],
     (2, "never struck")),
])
def test_a_finding_replays_from_its_script_after_the_run_and_not_without_the_flaw(
        env: dict[str, str], tmp_path: Path, flaw: str, scenario: str, extra: list[str],
        shows: list[str], fixed: tuple[int, str]) -> None:
    report = tmp_path / "run"
    done = harness(env, "run", "--reference", "--flaw", flaw, "--scenario", scenario, *extra,
                   "--report-dir", str(report), "--seed", "3", "--quiet")
    assert done.returncode == 1, done.stderr
    line = next(line for line, found in _scripts(report).items() if "P1" in found)
    command = line.split()
    assert command[0] == "bash" and os.access(command[1], os.X_OK)
    script = Path(command[1])
    text = script.read_text()
    assert all(part in text for part in shows), text
    assert f"reproduce/{script.name}" in (report / "index.html").read_text()

    # The run is over, its port and its store gone: the script starts its own target.
    replay = _play(script, env)
    assert replay.returncode == 1, replay.stdout + replay.stderr
    assert "reproduced: P1" in replay.stdout and f"broke again in {scenario}" in replay.stdout

    without = tmp_path / "fixed.sh"
    without.write_text(text.replace(f'"flaw": "{flaw}"', '"flaw": null'))
    assert without.read_text() != text
    replay = _play(without, env)
    code, says = fixed
    assert replay.returncode == code, replay.stdout + replay.stderr
    assert says.format(scenario=scenario) in replay.stdout


def _serve(tmp_path: Path) -> tuple[ManagedProcess, str]:
    """A correct reference server of the test's own, and its URL."""
    url = f"http://127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "reference_server", "--port", url.rsplit(":", 1)[1],
               "--store", f"sqlite:///{tmp_path / 'own.sqlite3'}", "--test-clock",
               "--test-faults"]
    server = ManagedProcess("a correct reference server", command,
                            log_path=tmp_path / "own.log", ready_url=f"{url}/_admin/health")
    return server.start(), url


def test_a_script_given_a_running_instance_plays_against_it_or_says_why_it_cannot(
        env: dict[str, str], tmp_path: Path) -> None:
    report = tmp_path / "run"
    done = harness(env, "run", "--reference", "--flaw", "no-fencing", "--scenario",
                   "zombie-original", "--scenario", "crash-mid-request", "--report-dir",
                   str(report), "--seed", "3", "--quiet")
    assert done.returncode == 1, done.stderr
    lines = _scripts(report)
    zombie = Path(next(line for line in lines if "zombie-original" in line).split()[1])
    server, url = _serve(tmp_path)
    try:
        replay = _play(zombie, env, url)
        assert replay.returncode == 0, replay.stdout + replay.stderr
        assert "not reproduced this time: zombie-original came out pass" in replay.stdout
    finally:
        server.stop()
    crashing = harness(env, "run", "--reference", "--flaw", "split-commit", "--scenario",
                       "crash-mid-request", "--report-dir", str(tmp_path / "crash"), "--seed",
                       "3", "--quiet")
    assert crashing.returncode == 1, crashing.stderr
    crash = Path(next(iter(_scripts(tmp_path / "crash"))).split()[1])
    replay = _play(crash, env, "http://127.0.0.1:9")
    assert replay.returncode == 2, replay.stdout + replay.stderr
    assert "run the script without BASE_URL" in replay.stdout + replay.stderr


def test_a_request_still_running_when_the_next_step_began_is_played_in_the_background() -> None:
    target = load_target("reference")
    history = History()
    original = history.invoke("request", "c0", key="k", tenant="t", method="POST",
                              path="/charges", body="{}", key_header='"k"',
                              headers={"X-Test-Delay-Ms": "1200"})
    history.record("info", "clock", "nemesis", value={"seconds": 31.0})
    retry = history.invoke("request", "c1", key="k", tenant="t", method="POST",
                           path="/charges", body="{}", key_header='"k"')
    history.complete(retry, "ok", status=201)
    history.complete(original, "ok", status=201)
    steps = _plan(history.events(), target)
    sends = [step for _, step in steps if not hasattr(step, "f")]
    assert [s.background for s in sends] == [True, False]  # type: ignore[attr-defined]
    assert [getattr(step, "f", "send") for _, step in steps] == ["send", "clock", "send"]


def test_a_request_sent_after_the_others_answer_is_the_next_step_not_its_twin() -> None:
    """Requests invoked within 10 ms of each other go out together through a barrier only if
    they all still ran together: a fast server's key-reuse requests, each sent once the one
    before was answered, were replayed at once, met "in progress", and did not reproduce."""
    target = load_target("reference")
    history = History()

    def invoke(key: str, body: str) -> Event:
        return history.invoke("request", "c0", key=key, tenant="t", method="POST",
                              path="/charges", body=body, key_header=f'"{key}"')

    original = invoke("k", "{}")
    history.complete(original, "ok", status=201)
    reuse = invoke("k", '{"amount": 2}')
    history.complete(reuse, "ok", status=201)
    twins = [invoke("k2", "{}"), invoke("k2", "{}")]
    for twin in twins:
        history.complete(twin, "ok", status=201)
    moments = [0.0, 0.004, 0.006, 0.010, 0.020, 0.021, 0.030, 0.031]
    events = [replace(e, time=t) for e, t in zip(history.events(), moments, strict=True)]
    sends = [step for _, step in _plan(events, target) if isinstance(step, _Send)]
    assert [[e.op for e in s.invokes] for s in sends] == [[original.op], [reuse.op],
                                                          [t.op for t in twins]]


def _race_lost_to_the_first_body() -> list[Event]:
    """Two bodies released at once with one key, as the run's fast target served them: the
    second told "in progress", its retry answered with the first body's charge (no-body-hash's
    P4)."""
    history = History()

    def invoke(process: str, body: str, attempt: int = 1) -> Event:
        return history.invoke("request", process, key="k-race", tenant="t-race", method="POST",
                              path="/charges", body=body, key_header='"k-race"',
                              attempt=attempt, label="reuse:concurrent")

    first = invoke("c0", '{"amount": 100, "currency": "usd", "customer": "cus_1"}')
    second = invoke("c1", '{"amount": 200, "currency": "usd", "customer": "cus_2"}')
    history.complete(second, "ok", status=409)
    history.complete(first, "ok", status=201, resource="ch_1")
    retry = invoke("c1", '{"amount": 200, "currency": "usd", "customer": "cus_2"}', attempt=2)
    history.complete(retry, "ok", status=201, resource="ch_1",
                     headers={"idempotent-replayed": "true"})
    moments = [0.0, 0.0005, 0.0015, 0.003, 0.004, 0.006]
    return [replace(e, time=t) for e, t in zip(history.events(), moments, strict=True)]


def test_requests_released_together_leave_winner_first_as_the_run_served_them() -> None:
    """The one the run's target told "in progress" is the race's loser: released at once
    again, the other body could win the key, and the loser's retry would meet its own
    response (a key-reuse race that did not reproduce in CI)."""
    events = _race_lost_to_the_first_body()
    sends = [step for _, step in _plan(events, load_target("reference")) if isinstance(step, _Send)]
    assert [len(s.invokes) for s in sends] == [2, 1]
    race = sends[0]
    assert race.losers == {events[1].index}
    assert 0 < race.head_start <= 0.0015


def test_a_race_replays_with_the_run_s_winner_every_time(env: dict[str, str],
                                                         tmp_path: Path) -> None:
    target = reference_target(store=None, flaw="no-body-hash")
    events = _race_lost_to_the_first_body()
    base = Reproduction("key-reuse", 1, ("P4",), "t-race/k-race", ("P4: the race",),
                        target.model_dump(mode="json"), {"flaw": "no-body-hash",
                                                         "store": "sqlite"}, tuple(events))
    path = tmp_path / "reproduction.json"
    path.write_text(base.to_json())
    for _ in range(3):  # released at once, the other body wins about half the time
        done = harness(env, "reproduce", str(path))
        assert done.returncode == 1, done.stdout + done.stderr
        assert "reproduced: P4 broke again" in done.stdout

"""``[clock] kind = "faketime"`` in a target file, and the offset file and environment the harness
gives a target's processes: validated like the rest of the file, and a missing library is a
clear error naming the fix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness._errors import ServiceUnavailable, TargetFileError
from harness.http.explore._machine import NEEDS
from harness.services._faketime import FaketimeClock
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._loader import parse_target
from scenarios import CATALOG
from tests.faketime.conftest import TARGETS

BASE: dict[str, Any] = {
    "name": "t",
    "start": {"command": ["serve", "{port}"]},
    "effects": {"kind": "recorder"},
    "clock": {"kind": "faketime"},
}


def problems(data: dict[str, Any]) -> str:
    with pytest.raises(TargetFileError) as caught:
        parse_target(data, source="t.toml")
    return str(caught.value)


def test_a_faketime_clock_gives_the_clock_capability() -> None:
    target = parse_target(BASE, source="t.toml")
    assert target.moves_clock and "clock" in target.capabilities()
    assert NEEDS["time_passes"] in target.capabilities()  # the explorer's clock rule applies
    assert CATALOG["late-retry"].not_applicable(target.with_promises(retention=60.0)) is None
    assert target.lease_can_run_out is False  # no lease promised
    leased = target.with_promises(lease=3600.0)
    assert leased.lease_can_run_out  # an hour-long lease runs out on a clock moved from outside
    assert "clock" not in target.without_clock_from_outside().capabilities()


def test_the_clock_table_is_validated_like_the_rest_of_the_file() -> None:
    running = {**BASE, "url": "http://127.0.0.1:1", "effects": {"kind": "recorder", "port": 9}}
    del running["start"]
    assert "give a [start] table, or use [hooks.clock]" in problems(running)
    both = {**BASE, "hooks": {"clock": {"path": "/clock"}}}
    assert "not both" in problems(both)
    wrong_kind = problems({**BASE, "clock": {"kind": "libfaketime"}})
    assert "clock.kind" in wrong_kind and "'faketime'" in wrong_kind
    assert "did you mean `check`?" in problems({**BASE, "clock": {"kind": "faketime",
                                                                   "chek": "/time"}})
    assert "did you mean `clock`?" in problems({**{k: v for k, v in BASE.items()
                                                   if k != "clock"}, "clok": {}})
    assert "must be a path starting with /" in problems({**BASE, "clock": {"kind": "faketime",
                                                                           "check": "time"}})


def test_the_offset_file_and_the_environment(faketime_ready: None, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    clock = FaketimeClock(tmp_path)
    assert clock.path.read_text() == "+0.000000\n"
    clock.advance(3600)
    clock.advance(0.5)
    assert clock.path.read_text() == "+3600.500000\n"
    env = clock.environment({"LD_PRELOAD": "/opt/mine.so", "KEEP": "1"})
    shim, library, mine = env["LD_PRELOAD"].split(":")
    assert shim.endswith("libidem-clock-shim.so") and "libfaketime" in library
    assert mine == "/opt/mine.so" and env["KEEP"] == "1"  # the target's own preload stays, last
    assert env["FAKETIME_TIMESTAMP_FILE"] == str(clock.path)
    assert env["FAKETIME_NO_CACHE"] == "1" and env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1"


def test_a_missing_library_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         toxiproxy_server: ToxiproxyServer) -> None:
    monkeypatch.setenv("IDEM_LIBFAKETIME", str(tmp_path / "absent.so"))
    with pytest.raises(ServiceUnavailable, match="IDEM_LIBFAKETIME"):
        FaketimeClock(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--target",
         str(TARGETS / "node-memory.toml"), "--scenario", "late-retry",
         "--report-dir", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "TOXIPROXY_URL": toxiproxy_server.url},
    )
    assert done.returncode == 2, done.stderr
    assert "libfaketime is unavailable" in done.stderr and "fix:" in done.stderr
    assert "Traceback" not in done.stderr


def test_every_process_shares_the_clock_s_names_and_none_makes_or_removes_its_own(
        faketime_ready: None, tmp_path: Path) -> None:
    """A start script's shell forks (``$(...)``) then execs the service: with names of its
    own the shell made them and the fork removed them on exit, and the service died with
    libfaketime's "sem_open failed" now and then (a consumer of the corpus, in the suite).
    Killed processes leave nothing behind either: the names are the clock's."""
    clock = FaketimeClock(tmp_path)
    semaphore, segment = clock.environment({})["FAKETIME_SHARED"].split()
    shared = [Path(f"/dev/shm/sem.{semaphore.lstrip('/')}"), Path(f"/dev/shm/{segment[1:]}")]
    assert all(path.exists() for path in shared)
    script = ('here="$(cd "$(dirname "$0")" && pwd)"; for i in 1 2 3; do x=$(date +%s); done; '
              f'exec {sys.executable} -c "import time; time.time(); time.sleep(0.3)"')
    started = subprocess.Popen(["bash", "-c", script], env=clock.environment(dict(os.environ)),
                               stderr=subprocess.PIPE, text=True)
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                              env=clock.environment(dict(os.environ)))
    try:
        _, err = started.communicate(timeout=30)
        assert started.returncode == 0 and "libfaketime" not in err, err
    finally:
        killed.kill()  # SIGKILL: libfaketime's own clean-up never runs
        killed.wait(timeout=10)
    for pid in (started.pid, killed.pid):
        assert not Path(f"/dev/shm/faketime_shm_{pid}").exists()
        assert not Path(f"/dev/shm/sem.faketime_sem_{pid}").exists()
    assert all(path.exists() for path in shared)  # no process removed them
    clock.close()
    assert not any(path.exists() for path in shared)

"""What the harness leaves behind: nothing it did not promise to keep.  A Toxiproxy started
without a log directory logs to a temporary one removed with it (a test session left tens of
megabytes in the state directory); a load worker whose master never answers gives up."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.services._network import free_port
from harness.services._toxiproxy import start_toxiproxy


def test_a_toxiproxy_without_a_log_directory_leaves_no_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IDEM_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.delenv("TOXIPROXY_URL", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    with start_toxiproxy() as server:
        server.client.version()
        assert list((tmp_path / "tmp").iterdir()), "it logs somewhere while it runs"
    assert not (tmp_path / "state" / "logs").exists()
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_toxiproxy_given_a_log_directory_keeps_its_log_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOXIPROXY_URL", raising=False)
    with start_toxiproxy(log_dir=tmp_path) as server:
        server.client.version()
    assert [p.name for p in tmp_path.iterdir()] == [f"toxiproxy-{server.url.rsplit(':', 1)[1]}.log"]


def test_a_load_worker_whose_master_never_answers_exits_2_after_its_timeout() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "harness.cli", "load", "--worker", "--master",
                           f"127.0.0.1:{free_port()}", "--connect-timeout", "2s"],
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 2, done.stderr
    assert "no Locust master answered" in done.stderr and "--connect-timeout" in done.stderr
    # Locust's own wait is 60 x 5 s: well under it, the 2 s were kept (importing Locust and
    # gevent alone took 34 s on a loaded 2-core machine)
    assert time.monotonic() - started < 120
    again = subprocess.run([sys.executable, "-m", "harness.cli", "load", "--reference",
                            "--connect-timeout", "2s"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "--worker" in again.stderr

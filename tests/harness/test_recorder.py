"""The recorder in the harness's process stays quiet when a target dies mid-call: the crash
scenarios kill targets on purpose, and socketserver printed a traceback for each reset."""

from __future__ import annotations

import socket
import struct
import threading

import httpx
import pytest

from harness.services._recorder import Recorder


def _join_handlers() -> None:
    """Wait for the recorder's handler threads to end (each within a few seconds)."""
    for thread in threading.enumerate():
        if "process_request_thread" in thread.name:
            thread.join(timeout=5)


def test_a_target_cut_off_mid_call_leaves_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:
    recorder = Recorder()
    try:
        host, port = recorder.url.removeprefix("http://").rsplit(":", 1)
        for partial in (b"", b"POST /effects HTTP/1.1\r\nContent-Length: 40\r\n\r\n{"):
            with socket.create_connection((host, int(port))) as link:
                link.sendall(partial)
                # linger 0: the close is a reset, as when the target's process is killed
                link.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # Connections are accepted in order: once this one is answered, the two before it
        # have their handler threads, and those are joined.
        answer = httpx.post(f"{recorder.url}/effects", json={"tenant": "t", "key": "k", "id": "1"})
        assert answer.status_code == 201 and recorder.total() == 1
        _join_handlers()
    finally:
        recorder.close()
    assert "Traceback" not in capfd.readouterr().err

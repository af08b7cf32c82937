"""The harness keeps the target's time across restarts (issue 23): a test clock kept in a
process's memory goes back to real time when the process restarts, and the harness puts every
jump back, by reading the restarted target's time or by what its file says a restart does; a
restart that nothing explains leaves the clock unknown, and the run says so instead of
judging leases on it.  Against the corpus's memory_clock service, a real process."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from harness._target import Target
from harness.http._deployment import Deployment
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from tests.corpus.conftest import corpus_target

JUMP = 7200.0


def _offset(deployment: Deployment) -> float:
    """How far ahead of real time the service's own clock is."""
    answer = httpx.get(deployment.instances[0].direct_url + "/admin/now", timeout=5)
    return float(answer.json()["now"]) - time.time()


def _restarted(target: Target, toxiproxy: ToxiproxyServer, workdir: Path) -> tuple[str, float,
                                                                                      bool]:
    with Deployment(target, toxiproxy=toxiproxy, workdir=workdir) as deployment:
        deployment.advance_clock(JUMP)
        assert abs(_offset(deployment) - JUMP) < 5
        after = deployment.restart(0)
        return after.outcome, _offset(deployment), deployment.clock_known


def test_a_restarted_clock_read_back_is_moved_forward_again(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    outcome, offset, known = _restarted(corpus_target("memory_clock"), toxiproxy_server,
                                        tmp_path)
    assert outcome == "restored" and abs(offset - JUMP) < 5 and known


def test_a_clock_the_file_says_a_restart_resets_is_moved_forward_again(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    target = corpus_target("memory_clock_blind")
    assert target.hooks.clock is not None and target.hooks.clock.read is None
    outcome, offset, known = _restarted(target, toxiproxy_server, tmp_path)
    assert outcome == "restored" and abs(offset - JUMP) < 5 and known


def test_a_restart_nothing_explains_leaves_the_clock_unknown(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    blind = corpus_target("memory_clock_blind")
    assert blind.hooks.clock is not None
    silent = blind.model_copy(update={"hooks": blind.hooks.model_copy(update={
        "clock": blind.hooks.clock.model_copy(update={"restart_resets": None})})})
    outcome, offset, known = _restarted(silent, toxiproxy_server, tmp_path)
    assert outcome == "unknown" and abs(offset) < 5 and not known


def test_a_clock_that_starts_ahead_is_no_jump_at_a_restart(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """The reference server keeps its clock's offset in its store: a second run on the same
    store starts ahead by what the first moved.  The keeper read that as a jump of 198 days at
    the first restart (the correct server on PostgreSQL, explored: a false P11, "0 keys within
    the retention")."""
    target = reference_target(store=None, flaw=None)
    with Deployment(target, toxiproxy=toxiproxy_server, workdir=tmp_path) as first:
        first.advance_clock(JUMP)
    with Deployment(target, toxiproxy=toxiproxy_server, workdir=tmp_path) as second:
        assert second.clock_keeper is not None
        assert abs(second.clock_keeper.origin - JUMP) < 5
        second.advance_clock(60)
        after = second.restart(0)
    assert after.outcome == "kept", after

"""Issue 23's last goal, time to the first failure no worse than before: the explorer tells the
opening (the shortest story of each kind) before Hypothesis draws, and Hypothesis's own first
examples start from a retry rather than a body the target must refuse."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from harness.explore import ExploreConfig, explore
from harness.http.explore._actions import NewRequest, Retry
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from reference_server.flaws import get_flaw
from tests.explore.recording import RecordingSession, reference_machine

REFERENCE = reference_target(store=None, flaw=None)

#: Reference flaws and the story of the opening that shows each (its place in the opening).
FOUND_IN_THE_OPENING = {
    "key-only": 1,  # a request and its retry
    "no-body-hash": 2,  # the key with another body
    "no-tenant-scope": 4,  # the same key from the other tenant
    "check-then-insert": 5,  # copies released together (the overlap after them, at worst)
    "short-ttl": 7,  # a retry just within the retention
    "no-cleanup": 8,  # a jump past the retention
    "stuck-after-crash": 10,  # a crash after the claim, a jump past the lease, a retry
    "split-commit": 11,  # the same, the crash after the work
}


@pytest.mark.parametrize("flaw", FOUND_IN_THE_OPENING)
def test_the_opening_finds_each_common_flaw_in_its_own_story(
        flaw: str, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """Before the opening, Hypothesis found these at seed 1 after 3 to 13 examples; a budget of
    one example is all the opening needs (Hypothesis does not draw once it failed)."""
    done = explore(ExploreConfig(target=reference_target(store=None, flaw=flaw),
                                 max_examples=1, seed=1, report_dir=tmp_path / "report",
                                 toxiproxy=toxiproxy_server, shrink_seconds=5,
                                 first_only=True))
    place = FOUND_IN_THE_OPENING[flaw] + (1 if flaw == "check-then-insert" else 0)
    named = set(get_flaw(flaw).properties)
    assert any(story.examples <= place and named & set(story.properties)
               for story in done.stories), (flaw, [(s.examples, s.kinds) for s in done.stories])


def test_the_opening_is_told_before_hypothesis_draws_unless_turned_off(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """On the correct server every story of the opening passes, and is told as an example of
    its own before Hypothesis's; ``--no-opening`` tells none."""

    def examples(opening: bool) -> int:
        done = explore(ExploreConfig(target=REFERENCE, max_examples=1, seed=1,
                                     report_dir=tmp_path / f"opening-{opening}",
                                     toxiproxy=toxiproxy_server, opening=opening))
        assert done.result.exit_code == 0
        told = done.result.extra["explore"]
        assert isinstance(told, dict)
        return int(told["examples"])

    # the reference server has every story but the reuses on another operation or query
    # string, and three crash points; six keys its rules refuse, one odd key they accept
    # (spaces around it), a case twin, the original's retry after a reuse, a late burst
    assert examples(True) - examples(False) == 22


def test_hypothesis_starts_from_a_request_and_its_retries() -> None:
    """Hypothesis's simplest example repeats the first rule in its order; that rule is the
    retry, so the example is a request and its retries (it was fourteen bodies the target must
    refuse: ``bad_body`` sorted first)."""
    session = RecordingSession()
    run_state_machine_as_test(reference_machine(session), settings=settings(
        max_examples=1, phases=[Phase.generate], database=None, stateful_step_count=5))
    [first, *retries] = session.stories[0]
    assert isinstance(first, NewRequest) and retries
    assert all(isinstance(r, Retry) and r.id == first.id for r in retries)

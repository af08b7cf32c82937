"""``past_the_lease``: the one place every judge asks whether a promised lease has run out since
an incident or a claim (P5's original holding its key, P9's key stuck after a crash, a
consumer's P9 key not done and P10 message held by a claim)."""

from __future__ import annotations

import pytest

from harness._target import LEASE_SLACK
from harness.judging._analysis import past_the_lease


@pytest.mark.parametrize(("lease", "since", "at", "past"), [
    (None, 0.0, 1e9, False),  # no lease promised: it never runs out
    (30.0, 100.0, 100.0 + 30.0, False),  # at the lease: a claim may still hold
    (30.0, 100.0, 100.0 + 30.0 + LEASE_SLACK, False),  # within the slack for the two clocks
    (30.0, 100.0, 100.0 + 30.0 + LEASE_SLACK + 0.001, True),
    (0.0, 5.0, 5.0 + LEASE_SLACK + 1.0, True),
    (30.0, 200.0, 100.0, False),  # before the incident
])
def test_a_lease_runs_out_only_past_its_slack(lease: float | None, since: float, at: float,
                                              past: bool) -> None:
    assert past_the_lease(lease, since=since, at=at) is past

"""How many stories an exploration tells again in real time (issue 23 item 2): a property a
moved clock showed is told in real time more than once, because the first story may not be the
one real time breaks (upsert_sqlite's no-fencing was missed at seed 1: its first takeover story
did not break in real time, and no later one was told), but not without end.

The session's bookkeeping is exercised here on worlds whose checker verdict is given, so each
telling's outcome is chosen; the telling itself is tested against real servers in
test_explorer.py."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

from harness._history import Event, History
from harness.explore._real_time import MAX_CONFIRMATIONS, TELLINGS_PER_PROPERTY, RealTimeStory
from harness.explore._steps import StepRecord
from harness.explore._story_session import StorySession
from harness.judging._checker import CheckResult
from harness.judging._findings import Finding

TAKEOVER = Finding(property="P1", key="k1", message="two charges for k1", events=(0,))
LOST = Finding(property="P9", key="k2", message="k2 stuck", events=(0,))


def doubted(*findings: Finding) -> CheckResult:
    """A verdict whose findings a moved clock alone showed."""
    return CheckResult({}, unconfirmed=list(findings))


def broken(*findings: Finding) -> CheckResult:
    return CheckResult({}, findings=list(findings))


PASSED = CheckResult({})


class GivenVerdictWorld:
    """A world that performs nothing and whose checker says what it was given."""

    def __init__(self, verdict: CheckResult) -> None:
        self.steps: list[StepRecord[Any]] = []
        self.history = History()
        self.failure = None
        self.doubted: list[Finding] = []
        self._verdict = verdict

    def step(self, action: Any) -> StepRecord[Any]:
        raise AssertionError("these stories have no steps")

    def observe(self, *, every_key: bool = False) -> tuple[Event, ...]:
        return ()

    def judge(self, events: Sequence[Event],
              properties: Sequence[str] | None = None) -> CheckResult:
        return self._verdict

    def settle(self) -> None:
        pass

    def close(self) -> None:
        pass


class GivenVerdictSession(StorySession[Any, GivenVerdictWorld]):
    """Each new world (a drawn example, or a telling in real time) gets the next verdict."""

    def __init__(self, verdicts: Sequence[CheckResult]) -> None:
        super().__init__(SimpleNamespace(target=None), retry_horizon=1.0)
        self._verdicts: Iterator[CheckResult] = iter(verdicts)

    def _new_world(self) -> GivenVerdictWorld:
        return GivenVerdictWorld(next(self._verdicts))

    def problems_with(self, actions: Sequence[Any]) -> list[str]:
        return []

    def retold(self, steps: Sequence[StepRecord[Any]], events: Sequence[Event],
               doubted: Sequence[Finding]) -> RealTimeStory[Any]:
        return RealTimeStory([], waits=1.0)


def test_a_property_real_time_did_not_break_once_is_told_again() -> None:
    session = GivenVerdictSession([doubted(TAKEOVER), PASSED,       # told, did not break
                                   doubted(TAKEOVER), broken(TAKEOVER)])  # told, broke
    session.play([])
    assert session.best is None and session.confirmations == 1
    session.play([])
    assert session.confirmations == 2
    assert session.best is not None and session.best.broken == "P1"
    assert session.confirmed is not None


def test_a_property_real_time_never_broke_is_not_told_past_its_share() -> None:
    tellings = [verdict for _ in range(TELLINGS_PER_PROPERTY)
                for verdict in (doubted(TAKEOVER), PASSED)]
    session = GivenVerdictSession([*tellings, doubted(TAKEOVER), doubted(LOST), PASSED])
    for _ in range(TELLINGS_PER_PROPERTY + 2):
        session.play([])
    assert session.best is None
    # P1's third story is not told; P9's first one is, within the exploration's share.
    assert session.confirmations == TELLINGS_PER_PROPERTY + 1 <= MAX_CONFIRMATIONS
    why = [n.message for n in session.moved_clock]
    assert "told in real time before, in vain" in why[TELLINGS_PER_PROPERTY]
    assert "did not break it" in why[-1]


def test_once_a_story_failed_one_no_shorter_is_not_worth_the_wait() -> None:
    """Shrinking looks for shorter stories only: on a busy machine key-only's shrinking told a
    story in real time, waiting 140 s for one no shorter than the one it had."""
    session = GivenVerdictSession([broken(TAKEOVER), doubted(LOST)])
    session.play([])
    assert session.best is not None
    session.play([])  # as short as the failure: no telling, so no world is asked for
    assert session.confirmations == 0
    assert "a story as short already failed" in session.moved_clock[-1].message


def test_the_first_sighting_with_a_moved_clock_is_kept_beside_the_first_failure() -> None:
    """The time to the first failure had the moved clock been trusted (as before issue 23),
    so that a failure confirmed only after a lease waited in real time can be compared."""
    session = GivenVerdictSession([PASSED, doubted(TAKEOVER), broken(TAKEOVER)])
    session.play([])
    assert session.first_sighting is None
    session.play([])
    assert session.first_sighting is not None and session.first_sighting[0] == 2
    assert session.first_failure is not None
    assert session.first_failure[1] >= session.first_sighting[1]
    # Once a story has failed, a sighting is no longer a first failure.
    later = GivenVerdictSession([broken(TAKEOVER), doubted(LOST)])
    later.play([])
    later.play([])
    assert later.first_failure is not None and later.first_sighting is None

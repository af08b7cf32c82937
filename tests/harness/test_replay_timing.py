"""A reproduction replays the timing the run observed (issue 38, item 14): a zombie-original
finding's script said "not reproduced" five times out of five, because in the run the slowed
original took 2.7 s under load and in the script 1.25 s, so the clock moved after it had
finished.  The slow hook is now stretched to at least the observed duration; a request that
ran long with nothing that can hold it again is said up front."""

from __future__ import annotations

from harness._history import NEMESIS, History
from harness.http.reproduction._replay import _plan, _Send, timing_notes
from harness.targets._loader import load_target

TARGET = load_target("reference")  # its slow hook: X-Test-Delay-Ms: {ms}


def _zombie_story(*, slowed: bool) -> History:
    """The run: the original slowed 1250 ms but answered only 2.7 s later (a loaded
    machine), the clock moved past the lease at 1.5 s while it still ran, a retry at 1.6 s."""
    history = History()
    headers = {"X-Test-Delay-Ms": "1250"} if slowed else None
    original = history.invoke("request", "c0", key="k1", tenant="t1", attempt=1,
                              method="POST", path="/charges", body='{"amount": 1}',
                              headers=headers)
    history._started -= 1.5
    history.record("info", "clock", NEMESIS, value={"seconds": 31.0})
    history._started -= 0.1
    retry = history.invoke("request", "c1", key="k1", tenant="t1", attempt=2, method="POST",
                           path="/charges", body='{"amount": 1}')
    history.complete(retry, "ok", status=201, resource="ch_2")
    history._started -= 1.1
    history.complete(original, "ok", status=201, resource="ch_1")
    return history


def _original(history: History) -> _Send:
    return next(step for _, step in _plan(history.events(), TARGET)
                if isinstance(step, _Send) and step.invokes[0].attempt == 1)


def test_the_slow_hook_is_stretched_to_the_duration_the_run_observed() -> None:
    step = _original(_zombie_story(slowed=True))
    assert step.background
    (held,) = step.stretched.values()
    assert held >= 2700, step.stretched


def test_a_request_the_run_did_not_hold_longer_than_asked_is_not_stretched() -> None:
    history = History()
    invoke = history.invoke("request", "c0", key="k1", tenant="t1", attempt=1, method="POST",
                            path="/charges", body='{"amount": 1}',
                            headers={"X-Test-Delay-Ms": "1250"})
    history._started -= 1.3
    history.complete(invoke, "ok", status=201, resource="ch_1")
    (_, step), = _plan(history.events(), TARGET)
    assert isinstance(step, _Send) and step.stretched == {}


def test_a_long_request_nothing_can_hold_again_is_said_up_front() -> None:
    notes = timing_notes(_zombie_story(slowed=False).events(), TARGET)
    assert len(notes) == 1 and "2.7 s" in notes[0] and "k1" in notes[0], notes
    assert timing_notes(_zombie_story(slowed=True).events(), TARGET) == []

"""No pass that tested nothing: a consumer scenario's fault must be shown, from the evidence, to
have met the job as meant; and the drain's rule for a settled queue.  Hand-written histories,
the shapes the issue reported (a kill after the pause had ended, a stall after the work)."""

from __future__ import annotations

from typing import Any

from harness._history import NEMESIS, ORACLE, History
from harness.consumer import ConsumerTarget
from harness.consumer._settling import unsettled
from harness.judging._checker import CheckOptions, check_history
from tests.consumer.test_judge import TARGET, drain, effects, publish


def judge(history: History) -> dict[str, tuple[str, str | None]]:
    assert isinstance(TARGET, ConsumerTarget)
    result = check_history(history.events(), CheckOptions.for_target(TARGET))
    return {pid: (r.verdict, r.reason) for pid, r in result.results.items()}


def intend(history: History, what: str, key: str, *properties: str, **details: Any) -> None:
    history.record("info", "intent", NEMESIS, key=key,
                   value={"what": what, "properties": list(properties), **details})


def observe(history: History, key: str, *, effects: int, ready: int) -> None:
    history.record("ok", "observe", ORACLE, key=key,
                   value={"effects": effects, "ready": ready, "consumers": 1})


def kill(history: History) -> None:
    history.record("info", "crash", NEMESIS, value={"how": "SIGKILL", "instance": 0})


def test_a_kill_after_the_job_committed_is_no_kill_mid_job() -> None:
    history = History()
    publish(history, "k")
    intend(history, "killed-mid-job", "k", "P2", "P9", instance=0)
    observe(history, "k", effects=1, ready=0)  # the pause had ended: the job was done
    kill(history)
    drain(history)
    effects(history, "k", 1)
    verdicts = judge(history)
    assert verdicts["P2"][0] == "unknown" and verdicts["P9"][0] == "unknown"
    assert "already committed when the consumer was killed" in (verdicts["P2"][1] or "")
    assert verdicts["P1"][0] == "pass"  # not what the intent is about


def test_a_kill_while_the_message_was_taken_and_not_done_is_shown_without_a_feed() -> None:
    history = History()
    publish(history, "k")
    intend(history, "killed-mid-job", "k", "P2", "P9", instance=0)
    observe(history, "k", effects=0, ready=0)
    kill(history)
    drain(history)
    effects(history, "k", 1)
    assert {p: v for p, (v, _) in judge(history).items()}["P2"] == "pass"


def test_a_kill_before_the_consumer_took_the_message_is_not_shown() -> None:
    history = History()
    publish(history, "k")
    intend(history, "killed-mid-job", "k", "P2", "P9", instance=0)
    observe(history, "k", effects=0, ready=1)
    kill(history)
    drain(history)
    effects(history, "k", 1)
    verdict, reason = judge(history)["P9"]
    assert verdict == "unknown" and "still waiting in the queue" in (reason or "")


def test_with_a_feed_the_killed_process_must_have_taken_the_key() -> None:
    history = History()
    publish(history, "k")
    history.record("ok", "deliver", "consumer-1", key="k", value={"pid": 2})
    intend(history, "killed-mid-job", "k", "P2", "P9", instance=0)
    kill(history)
    drain(history)
    effects(history, "k", 1)
    verdict, reason = judge(history)["P2"]
    assert verdict == "unknown" and "had not reported taking" in (reason or "")


def test_a_copy_after_the_first_job_committed_tested_nothing() -> None:
    history = History()
    publish(history, "k")
    history.record("ok", "pause", "consumer-0", key="k", value={"seconds": 8.0})
    history.record("ok", "commit", "consumer-0", key="k", value={})
    intend(history, "copy-while-working", "k", "P1", "P9", instance=0, pause_seconds=8.0)
    history.record("ok", "deliver", "consumer-1", key="k", value={"redelivered": True})
    drain(history)
    effects(history, "k", 1)
    verdict, reason = judge(history)["P1"]
    assert verdict == "unknown" and "after the first job had committed" in (reason or "")


def test_a_duplicate_is_a_finding_whatever_the_precondition() -> None:
    history = History()
    publish(history, "k")
    intend(history, "copies-overlapped", "k", "P1", copies=4)
    drain(history)
    effects(history, "k", 2)
    assert judge(history)["P1"][0] == "fail"


def test_an_ack_sent_while_acks_were_held_is_not_final() -> None:
    history = History()
    publish(history, "k")
    history.record("info", "fault", NEMESIS,
                   value={"fault": "ack-held", "where": "consumer", "instance": 0})
    history.record("ok", "deliver", "consumer-0", key="k", value={"pid": 1})
    history.record("ok", "ack", "consumer-0", key="k", value={"pid": 1})
    history.record("info", "heal", NEMESIS,
                   value={"fault": "ack-held", "where": "consumer", "instance": 0})
    live = [("consumer-0", 1)]
    assert "k" in unsettled(history.events(), {"k": 1}, live)
    history.record("ok", "deliver", "consumer-0", key="k", value={"pid": 1, "redelivered": True})
    assert "still held" in unsettled(history.events(), {"k": 1}, live)["k"]
    history.record("ok", "ack", "consumer-0", key="k", value={"pid": 1})
    assert unsettled(history.events(), {"k": 1}, live) == {}


def test_a_delivery_held_by_a_dead_process_waits_for_its_redelivery() -> None:
    history = History()
    publish(history, "k")
    history.record("ok", "deliver", "consumer-0", key="k", value={"pid": 1})
    # the process was killed and started again as pid 2: nothing it reported settles the key
    live = [("consumer-0", 2)]
    assert "0 of its 1 message(s)" in unsettled(history.events(), {"k": 1}, live)["k"]
    history.record("ok", "deliver", "consumer-0", key="k", value={"pid": 2, "redelivered": True})
    history.record("ok", "ack", "consumer-0", key="k", value={"pid": 2})
    assert unsettled(history.events(), {"k": 1}, live) == {}


def _hold(history: History, f: str, instance: int) -> None:
    history.record("info", f, NEMESIS,
                   value={"fault": "ack-held", "where": "consumer", "instance": instance})


def _cut(history: History, instance: int) -> None:
    history.record("info", "fault", NEMESIS,
                   value={"fault": "connection-cut", "where": "consumer", "instance": instance})


def test_a_second_lost_ack_is_weighed_against_its_own_hold_on_its_own_consumer() -> None:
    """An explored story may hold the acks, cut and lift the hold more than once, on two
    consumers: each lost ack is weighed against the hold its cut met, not the first one."""
    history = History()
    for key in ("k1", "k2"):
        for instance in (0, 1):
            _hold(history, "fault", instance)
        publish(history, key)
        intend(history, "work-done-ack-held", key, "P1", "P9", instance=0, incident="cut")
        observe(history, key, effects=1, ready=0)
        for instance in (0, 1):
            _cut(history, instance)
        for instance in (0, 1):
            _hold(history, "heal", instance)
    drain(history)
    effects(history, "k1", 1)
    effects(history, "k2", 1)
    verdicts = judge(history)
    assert verdicts["P1"] == ("pass", None) and verdicts["P9"][0] == "pass", verdicts

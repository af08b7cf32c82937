"""The checker over hand-written consumer histories: each property's finding, its pass, and
"unknown" where the evidence cannot decide."""

from __future__ import annotations

from typing import Any

from harness._history import NEMESIS, ORACLE, History
from harness.consumer import ConsumerTarget
from harness.judging._checker import CheckOptions, check_history
from harness.targets._loader import parse_target

TARGET = parse_target({
    "name": "c", "kind": "consumer",
    "start": {"command": ["consume", "{amqp_url}"]},
    "effects": {"kind": "sql", "dsn": "sqlite:///x", "query": "select 1 where %(key)s"},
    "message": {"poison": "not a charge"},
    "promises": {"dedup_window": "1h", "lease": "30s", "max_attempts": 3,
                 "dead_letter_queue": "dead"},
}, source="t.toml")


def publish(history: History, key: str, *, outcome: str = "ok", **value: Any) -> None:
    invoke = history.invoke("publish", "producer", key=key, label=value.pop("label", "original"),
                            value={"message_id": value.pop("message_id", f"m-{key}"), **value})
    history.complete(invoke, outcome)  # type: ignore[arg-type]


def effects(history: History, key: str, count: int) -> None:
    history.record("ok", "effects", ORACLE, key=key, value={"count": count})


def drain(history: History, *, drained: bool = True) -> None:
    history.record("ok" if drained else "info", "drain", ORACLE,
                   value={"settled": drained, "waited": 1.0})


def judge(history: History) -> dict[str, tuple[str, list[str]]]:
    assert isinstance(TARGET, ConsumerTarget)
    result = check_history(history.events(), CheckOptions.for_target(TARGET))
    return {pid: (r.verdict, [f.message for f in r.findings]) for pid, r in result.results.items()}


def test_a_consumer_history_is_judged_by_the_consumer_properties() -> None:
    history = History()
    publish(history, "k1")
    drain(history)
    effects(history, "k1", 1)
    verdicts = judge(history)
    assert sorted(verdicts) == ["P1", "P10", "P11", "P2", "P9"]
    assert {v for v, _ in verdicts.values()} == {"pass"}


def test_two_effects_after_a_cut_connection_are_a_duplicate() -> None:
    history = History()
    publish(history, "k1")
    history.record("info", "fault", NEMESIS, value={"fault": "ack-held", "where": "consumer"})
    history.record("ok", "deliver", "consumer-0", key="k1", value={"redelivered": False})
    history.record("info", "heal", NEMESIS, value={"fault": "ack-held", "where": "consumer"})
    history.record("ok", "deliver", "consumer-0", key="k1", value={"redelivered": True})
    drain(history)
    effects(history, "k1", 2)
    verdicts = judge(history)
    assert verdicts["P1"][0] == "fail"
    assert "delivered 2 time(s), 1 of them redelivered" in verdicts["P1"][1][0]
    assert "ran the job again" in verdicts["P1"][1][0]
    assert verdicts["P9"][0] == "fail"


def _ran_twice_then_cut(final: int) -> dict[str, tuple[str, list[str]]]:
    """A key republished under a new message id, run twice and counted so, then its
    consumer's connection cut and healed, and ``final`` effects at the end."""
    history = History()
    publish(history, "k1")
    publish(history, "k1", label="republish", message_id="m-2")
    effects(history, "k1", 2)
    history.record("info", "fault", NEMESIS, value={"fault": "connection-cut", "where": "consumer"})
    history.record("info", "heal", NEMESIS, value={"fault": "connection-cut", "where": "consumer"})
    drain(history)
    effects(history, "k1", final)
    return judge(history)


def test_a_key_that_ran_twice_before_an_incident_is_not_the_incidents_doing() -> None:
    """P9 blames an incident only for effects it can have caused: the two effects were
    counted before the cut (faststream_redis short-ttl, node_acm message-id-only: explore said
    P1 and P9, run said P1)."""
    verdicts = _ran_twice_then_cut(2)
    assert verdicts["P1"][0] == "fail"
    assert verdicts["P9"][0] == "pass", verdicts["P9"]


def test_a_key_that_ran_again_after_an_incident_is_its_doing() -> None:
    """The same story with a third effect after the cut: that one the incident may have caused."""
    verdicts = _ran_twice_then_cut(3)
    assert verdicts["P9"][0] == "fail"
    assert "ended with 3 effects" in verdicts["P9"][1][0]


def test_a_key_republished_after_an_incident_may_owe_its_second_effect_to_the_republish() -> None:
    """Published during a cut, run once after it; republished later under a new message id
    and run again (faststream_redis short-ttl at seed 1): P1's evidence.  Which message ran
    the second time nobody saw (no events feed), so P9 cannot blame the cut: unknown, with
    the reason."""
    history = History()
    history.record("info", "fault", NEMESIS, value={"fault": "connection-cut", "where": "consumer"})
    publish(history, "k1")
    history.record("info", "heal", NEMESIS, value={"fault": "connection-cut", "where": "consumer"})
    effects(history, "k1", 1)
    publish(history, "k1", label="republish", message_id="m-2")
    drain(history)
    effects(history, "k1", 2)
    verdicts = judge(history)
    assert verdicts["P1"][0] == "fail"
    assert verdicts["P9"][0] == "unknown", verdicts["P9"]


def test_messages_published_during_a_stall_may_each_have_run_once() -> None:
    """node_acm message-id-only at seed 1: a message and four republishes of its key sent
    while the consumers' connections stalled, five effects after the heal.  Each message may
    have run once (P1's evidence: the consumer deduplicates on the message id); nothing shows
    one ran twice, so P9 is unknown."""
    history = History()
    history.record("info", "fault", NEMESIS, value={"fault": "connection-stall",
                                                   "where": "consumer"})
    publish(history, "k1")
    for copy in range(4):
        publish(history, "k1", label="republish", message_id=f"m-{copy}")
    history.record("info", "heal", NEMESIS, value={"fault": "connection-stall",
                                                  "where": "consumer"})
    drain(history)
    effects(history, "k1", 5)
    verdicts = judge(history)
    assert verdicts["P1"][0] == "fail"
    assert verdicts["P9"][0] == "unknown", verdicts["P9"]
    effects(history, "k1", 6)  # six from five messages: one of them ran again
    assert judge(history)["P9"][0] == "fail"


def test_a_republished_key_says_the_consumer_deduplicates_on_the_message_not_the_key() -> None:
    """Whichever broker: a RabbitMQ message's id, a Kafka record's place in the log."""
    history = History()
    publish(history, "k1", outcome="info")
    publish(history, "k1", label="republish", message_id="m-2")
    drain(history)
    effects(history, "k1", 2)
    verdict, messages = judge(history)["P1"]
    assert verdict == "fail" and "deduplicates on something of the message's own (its id, its " \
        "place in the log) at most, not on the key" in messages[0]


def test_a_confirmed_message_without_effect_after_draining_is_a_lost_outcome() -> None:
    history = History()
    publish(history, "k1")
    history.record("info", "crash", NEMESIS, value={"how": "SIGKILL", "instance": 0})
    drain(history)
    effects(history, "k1", 0)
    verdict, messages = judge(history)["P2"]
    assert verdict == "fail" and "acked before its work" in messages[0]


def test_without_a_drain_a_missing_effect_is_unknown_not_a_finding() -> None:
    history = History()
    publish(history, "k1")
    drain(history, drained=False)
    history.record("ok", "leftover", ORACLE, key="k1", value={"message_id": "m-k1"})
    effects(history, "k1", 0)
    verdicts = judge(history)
    assert verdicts["P2"][0] == "unknown"


def test_an_unconfirmed_publish_may_be_lost() -> None:
    history = History()
    publish(history, "k1", outcome="info")
    drain(history)
    effects(history, "k1", 0)
    assert judge(history)["P2"][0] == "pass"


def test_a_poison_message_that_loops_or_charges_is_caught() -> None:
    history = History()
    publish(history, "p1", poison=True)
    for _ in range(5):
        history.record("ok", "deliver", "consumer-0", key="p1", value={"redelivered": True})
    publish(history, "c1", label="control")
    drain(history)
    effects(history, "p1", 1)
    effects(history, "c1", 1)
    verdict, messages = judge(history)["P10"]
    assert verdict == "fail"
    assert any("caused 1 effect" in m for m in messages)
    assert any("delivered 5 times" in m for m in messages)


def test_a_poison_message_dead_lettered_without_effect_holds() -> None:
    history = History()
    publish(history, "p1", poison=True)
    publish(history, "c1", label="control")
    drain(history)
    history.record("ok", "dead-lettered", ORACLE, key="p1", value={"message_id": "m-p1"})
    effects(history, "p1", 0)
    effects(history, "c1", 1)
    assert judge(history)["P10"][0] == "pass"


def _failing_job_left_in_the_queue(*, cut: bool) -> History:
    history = History()
    publish(history, "f1", fails={"deliveries": "every", "when": "before-work"})
    if cut:
        history.record("info", "fault", NEMESIS, value={"fault": "connection-cut",
                                                        "where": "consumer"})
        history.record("info", "heal", NEMESIS, value={"fault": "connection-cut",
                                                       "where": "consumer"})
    history.record("info", "drain", ORACLE, value={"settled": False, "waited": 15.0,
                                                   "left": 1, "dead_letter_queue": "dead"})
    history.record("ok", "leftover", ORACLE, key="f1", value={"message_id": "m-f1"})
    effects(history, "f1", 0)
    return history


def test_a_failing_job_left_within_the_lease_after_a_cut_is_unknown_not_a_loop() -> None:
    """A cut may leave a claim held until the lease runs out (the correct faststream consumer,
    explored: the job's redelivery waited for it); 15 s of a 30 s lease prove no loop."""
    verdict, messages = judge(_failing_job_left_in_the_queue(cut=True))["P10"]
    assert verdict == "unknown" and not messages


def test_a_failing_job_left_in_the_queue_with_no_incident_loops() -> None:
    verdict, messages = judge(_failing_job_left_in_the_queue(cut=False))["P10"]
    assert verdict == "fail" and "never dead-lettered" in messages[0]


def test_a_second_effect_past_the_dedup_window_is_allowed() -> None:
    history = History()
    publish(history, "k1")
    history.record("info", "clock", NEMESIS, value={"seconds": 7200})
    publish(history, "k1", label="late", message_id="m-2")
    drain(history)
    effects(history, "k1", 2)
    assert judge(history)["P1"][0] == "pass"


def test_a_key_published_again_past_its_window_after_a_cut_may_run_twice() -> None:
    """An explored story: a job, its consumer's connection cut later (another key's lost ack),
    the clock past the dedup window, the key published again: two effects are the two windows'
    (P1 notes it), never a P9 'instead of exactly one'."""
    history = History()
    publish(history, "k1")
    history.record("info", "fault", NEMESIS, value={"fault": "connection-cut",
                                                   "where": "consumer", "instance": 0})
    history.record("info", "heal", NEMESIS, value={"fault": "connection-cut",
                                                  "where": "consumer", "instance": 0})
    history.record("info", "clock", NEMESIS, value={"seconds": 2 * 3600.0, "via": "hook"})
    publish(history, "k1", label="republish", message_id="m-k1-again")
    drain(history)
    effects(history, "k1", 2)
    verdicts = judge(history)
    assert verdicts["P9"] == ("pass", []) and verdicts["P1"] == ("pass", []), verdicts
    effects(history, "k1", 3)  # a third is one more than the two windows allow
    assert judge(history)["P9"][0] == "fail"


def _dedup_row_seen(past: float) -> dict[str, tuple[str, list[str]]]:
    history = History()
    publish(history, "k1")
    drain(history)
    effects(history, "k1", 1)
    history.record("info", "clock", NEMESIS, value={"seconds": 3600.0 + past, "via": "hook"})
    history.record("ok", "store-size", ORACLE, value={"rows": 1})
    return judge(history)


def test_a_dedup_row_within_a_second_past_its_window_is_no_p11() -> None:
    """Issue 38, item 1: a store whose expiry is in whole seconds (Redis EXPIRE) keeps a row up
    to a second past the window; the finding, when there is one, says how far past."""
    assert _dedup_row_seen(0.5)["P11"] == ("pass", [])
    verdict, messages = _dedup_row_seen(600)["P11"]
    assert verdict == "fail" and "10m past" in messages[0], messages

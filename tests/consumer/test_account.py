"""The queue account (harness/consumer/_account.py): what became of every message and job, kept
by the checker beside its verdicts and shown in results.json, the terminal and the page."""

from __future__ import annotations

import io
import json

from rich.console import Console

from harness._history import NEMESIS, ORACLE, History
from harness._outcomes import RunFinished, RunResult, ScenarioOutcome
from harness.consumer import ConsumerTarget
from harness.judging._checker import CheckOptions, check_history
from harness.reports import ConsoleReport
from harness.reports._html import render_html
from harness.reports._results import render_results
from tests.consumer.test_judge import TARGET, drain, effects, publish


def history() -> History:
    """Five jobs: one fine (delivered, redelivered after a cut, acked twice), one duplicated,
    one lost, one whose publish was never confirmed but ran, one poison dead-lettered."""
    h = History()
    publish(h, "fine")
    h.record("ok", "deliver", "consumer-0", key="fine", value={"redelivered": False, "pid": 1})
    h.record("info", "fault", NEMESIS, value={"fault": "connection-cut", "where": "consumer"})
    h.record("info", "heal", NEMESIS, value={"fault": "connection-cut", "where": "consumer"})
    h.record("ok", "deliver", "consumer-0", key="fine", value={"redelivered": True, "pid": 1})
    h.record("ok", "ack", "consumer-0", key="fine", value={"pid": 1})
    publish(h, "twice")
    publish(h, "gone")
    publish(h, "maybe", outcome="info")
    publish(h, "poison", poison=True)
    drain(h)
    h.record("ok", "dead-lettered", ORACLE, key="poison", value={"message_id": "m-poison"})
    for key, count in (("fine", 1), ("twice", 2), ("gone", 0), ("maybe", 1), ("poison", 0)):
        effects(h, key, count)
    return h


def account() -> dict[str, object]:
    assert isinstance(TARGET, ConsumerTarget)
    return check_history(history().events(), CheckOptions.for_target(TARGET)).summary


def test_the_checker_keeps_an_account_of_every_job() -> None:
    summary = account()
    assert {k: summary[k] for k in ("keys", "published", "confirmed", "delivered",
                                    "redelivered", "acked", "dead_lettered", "effects")} == {
        "keys": 5, "published": 5, "confirmed": 4, "delivered": 2, "redelivered": 1,
        "acked": 1, "dead_lettered": 1, "effects": 4}
    assert summary["outcomes"] == {"ok": 2, "lost": 1, "duplicated": 1, "recovered": 1,
                                   "unexpected": 0, "unsettled": 0, "unknown": 0}
    assert summary["fractions"]["lost"] == 0.2  # type: ignore[index]
    per_key = summary["per_key"]
    assert per_key["maybe"]["outcome"] == "recovered"  # type: ignore[index]
    assert per_key["poison"]["outcome"] == "ok"  # type: ignore[index]


def test_without_a_feed_deliveries_and_acks_are_not_reported_not_zero() -> None:
    h = History()
    publish(h, "k")
    drain(h)
    effects(h, "k", 1)
    assert isinstance(TARGET, ConsumerTarget)
    summary = check_history(h.events(), CheckOptions.for_target(TARGET)).summary
    assert summary["delivered"] is None and summary["acked"] is None
    assert summary["outcomes"]["ok"] == 1  # type: ignore[index]


def run_result() -> RunResult:
    assert isinstance(TARGET, ConsumerTarget)
    events = history().events()
    check = check_history(events, CheckOptions.for_target(TARGET))
    outcome = ScenarioOutcome("lost-ack", check.verdict, ("P1", "P2"), check, None, events, 1.0)
    return RunResult(TARGET, (outcome,), 7, "2026-01-01T00:00:00+00:00", None, 86400.0, 1.0)


def test_results_json_the_terminal_and_the_page_show_the_account() -> None:
    result = run_result()
    data = json.loads(render_results(result))
    assert data["queue_account"]["outcomes"]["duplicated"] == 1
    assert data["scenarios"][0]["queue_account"]["per_key"]["gone"]["outcome"] == "lost"
    out = io.StringIO()
    ConsoleReport(Console(file=out, width=200), quiet=True).handle(RunFinished(result))
    printed = out.getvalue()
    assert ("queue account: 5 job(s) · 5 published, 4 confirmed · 2 delivered (1 redelivered) "
            "· 1 acked · 1 dead-lettered · 4 effect(s)") in printed
    assert "lost 1 (20%) · duplicated 1 (20%) · recovered 1 (20%)" in printed
    page = render_html(result)
    assert "Queue account" in page and "whole run" in page

"""A finding's headline is told from its own evidence: a P9 finding names what broke (a crash,
a store outage, a stalled or cut broker connection), and a queue consumer's P9 speaks of
redeliveries, not of a server dying mid-request."""

from __future__ import annotations

from typing import Any

import pytest

from harness._history import NEMESIS, History
from harness._outcomes import RunResult, ScenarioOutcome
from harness.judging._checker import CheckResult, PropertyResult
from harness.judging._findings import Finding
from harness.reports._runview import run_view
from harness.targets._loader import load_target

CONSUMER = "harness/consumer/targets/reference-consumer.toml"


def _headline(target_file: str, f: str, value: dict[str, Any]) -> tuple[str, str]:
    history = History()
    history.record("info", f, NEMESIS, value=value)
    events = history.events()
    finding = Finding("P9", "k1", "key k1 ended with 2 effects", (events[0].index,))
    check = CheckResult({"P9": PropertyResult("P9", "fail", (finding,))}, [finding])
    outcome = ScenarioOutcome("some-scenario", "fail", ("P9",), check, None, tuple(events))
    result = RunResult(load_target(target_file), (outcome,), 1, "2026-01-01T00:00:00+00:00",
                       None, 86400.0, 1.0, True)
    plain = run_view(result).findings[0].plain
    return plain.headline, plain.meaning


@pytest.mark.parametrize(("f", "value", "headline"), [
    ("fault", {"fault": "connection-stall", "where": "consumer"},
     "A stalled broker connection left the key broken"),
    ("fault", {"fault": "connection-cut", "where": "consumer"},
     "A cut broker connection left the key broken"),
    ("crash", {"how": "SIGKILL", "instance": 0}, "A crash left the key broken"),
])
def test_a_consumer_p9_headline_names_what_broke(f: str, value: dict[str, Any],
                                                 headline: str) -> None:
    said, meaning = _headline(CONSUMER, f, value)
    assert said == headline
    assert "redeliveries" in meaning and "dies mid-request" not in meaning


def test_an_http_p9_headline_names_a_store_outage_or_a_crash() -> None:
    said, meaning = _headline("reference", "fault", {"fault": "store-down", "where": "store"})
    assert said == "A store outage left the key broken"
    assert "dies mid-request" in meaning
    assert _headline("reference", "crash", {"how": "hook:after-work"})[0] == \
        "A crash left the key broken"

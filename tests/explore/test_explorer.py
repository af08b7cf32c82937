"""The explorer end to end, from pytest, with small budgets: the real reference server, the
real Toxiproxy, the real checker.  CI runs this, so the explorer keeps working."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness._target import Target
from harness.explore import (
    ExploreConfig,
    ReplayConfig,
    Story,
    StoryStep,
    explore,
    load_story,
    replay,
)
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._keys import KeyPlan
from harness.http.explore._actions import (
    Action,
    Crash,
    HandlerFault,
    NewRequest,
    Overlap,
    Retry,
    Reuse,
    Slow,
    Wait,
)
from harness.http.explore._front import HTTP
from harness.reports import ReportDirectory
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._reference import reference_target
from reference_server.flaws import FLAWS
from tests.corpus.conftest import corpus_target

#: Small budgets: the suite shares a 2-core machine with everything else.
SHRINK_SECONDS = 6.0
BODY = {"amount": 100, "currency": "usd", "customer": "x"}


def test_the_correct_reference_server_holds_for_a_small_budget(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    done = explore(ExploreConfig(target=reference_target(store=None, flaw=None),
                                 max_examples=5, seed=5, report_dir=tmp_path,
                                 toxiproxy=toxiproxy_server), [ReportDirectory(tmp_path)])
    assert done.story is None and done.result.verdict == "pass", done.result.findings
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["verdict"] == "pass" and results["seed"] == 5
    assert results["extra"]["explore"]["found"] is False
    assert not (tmp_path / "story.json").exists()


def test_a_flaw_is_found_shrunk_saved_and_its_story_replays(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    target = reference_target(store=None, flaw="key-only")
    done = explore(ExploreConfig(target=target, max_examples=30, seed=1,
                                 report_dir=tmp_path / "explore", toxiproxy=toxiproxy_server,
                                 shrink_seconds=SHRINK_SECONDS, first_only=True),
                   [ReportDirectory(tmp_path / "explore")])
    story = done.story
    assert story is not None and done.story_path == tmp_path / "explore" / "story.json"
    assert set(story.properties) & set(FLAWS["key-only"].properties)
    assert story.operations <= 6 and 1 <= story.examples <= 30
    results = json.loads((tmp_path / "explore" / "results.json").read_text())
    assert results["verdict"] == "fail"
    findings = results["scenarios"][0]["findings"]
    assert findings and all(f["reproduce"].startswith("idem-harness replay ") for f in findings)
    failure = ET.parse(tmp_path / "explore" / "junit.xml").find("testsuite/testcase/failure")
    assert failure is not None and story.property is not None
    assert story.property in (failure.get("message") or "")
    assert (tmp_path / "explore" / "history.jsonl").read_text().strip()

    again = replay(load_story(done.story_path), ReplayConfig(
        target=target, report_dir=tmp_path / "replay", toxiproxy=toxiproxy_server),
        [ReportDirectory(tmp_path / "replay")])
    assert json.loads((tmp_path / "replay" / "results.json").read_text())["verdict"] == "fail"
    assert again.reproduced and again.result.exit_code == 1
    told = [s.action for s in again.story.steps if not s.settle]
    assert told in (story.actions(), HTTP.in_order(story.actions()))


def hand_written(*actions: Action) -> Story:
    return Story(seed=0, examples=0, seconds=0.0, target="reference-server",
                 steps=[StoryStep(number=n, kind="request", text=a.text(), action=a)
                        for n, a in enumerate(actions, start=1)])


#: A request that outlives its lease, a clock jump past it, and the retry that takes over
#: (on a reference server whose lease is 3 s, so that real time can confirm it quickly).
TAKEOVER = hand_written(
    Slow(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), delay_ms=1000, body=BODY),
    Clock(seconds=8, why="past the lease"),
    Retry(id="o1"),
)
SHORT_LEASE = ("--lease", "3s")


def reference(flaw: str | None, *args: str) -> Target:
    target = reference_target(store=None, flaw=flaw)
    return target.with_start_args(list(args)).with_promises(lease=3.0) if args else target
#: The same key from two tenants.
SHARED_KEY = hand_written(
    NewRequest(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), body=BODY),
    NewRequest(id="o2", tenant="b", key=KeyPlan(name="k1"), body=BODY),
)

#: A crash after the claim, then the key reused with another body: the reuse's 422 answers the
#: reuse, not the crashed charge, which the clients still settle past the lease (it was taken
#: as answered, and ledger_sqlite's no-lease was missed).
CRASH_THEN_REUSE = hand_written(
    Crash(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), point="after-claim",
          body=BODY),
    Reuse(id="o1", change="field", field="amount", body={**BODY, "amount": BODY["amount"] + 1}),
)


@pytest.mark.parametrize(("story", "flaw", "expected"), [
    (TAKEOVER, None, None),
    (TAKEOVER, "no-fencing", "P1"),
    (SHARED_KEY, None, None),
    (SHARED_KEY, "no-tenant-scope", "P8"),
    (CRASH_THEN_REUSE, None, None),
    (CRASH_THEN_REUSE, "stuck-after-crash", "P9"),
])
def test_a_story_holds_on_the_correct_server_and_breaks_the_flaw_it_is_about(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path, story: Story, flaw: str | None,
        expected: str | None) -> None:
    args = SHORT_LEASE if story is TAKEOVER else ()
    done = replay(story, ReplayConfig(target=reference(flaw, *args),
                                      report_dir=tmp_path, toxiproxy=toxiproxy_server))
    if expected is None:
        assert done.result.verdict == "pass", done.result.findings
    else:
        assert expected in done.story.properties


def test_a_retry_that_met_its_original_answered_is_told_so_when_the_race_goes_the_other_way(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """key-only at seed 1 shrinks to a retry 1 ms after its original, which in the run left
    once the 3 ms original was answered and got key-only's 200; a loaded CI machine told it
    three times with the retry meeting the original running (409), and the replay said "not
    reproduced".  Here the handler takes 300 ms, so the drawn telling always meets it running:
    the second telling sends the retry once the original is answered, and breaks P3."""
    overlap = Overlap(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), body=BODY,
                      after_ms=0)
    story = hand_written(overlap).model_copy(update={"property": "P3"})
    slow_handler = reference_target(store=None, flaw="key-only").with_start_args(
        ["--work-delay-ms", "300"])
    done = replay(story, ReplayConfig(target=slow_handler, report_dir=tmp_path,
                                      toxiproxy=toxiproxy_server))
    assert done.reproduced and done.result.extra["replay"]["tellings"] == 2
    told = [s.action for s in done.story.steps if not s.settle]
    assert told == [overlap.model_copy(update={"in_order": True})]
    assert "in_order=True" in done.story.steps[0].text


def test_a_finding_a_jump_showed_is_reported_once_real_time_shows_it_too(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """The takeover needs a jump made while the original ran: the story is told again with a
    real wait in its place (the original slowed as much longer), and that is the story kept."""
    done = replay(TAKEOVER, ReplayConfig(target=reference("no-fencing", *SHORT_LEASE),
                                         report_dir=tmp_path, toxiproxy=toxiproxy_server))
    assert "P1" in done.story.properties and done.result.verdict == "fail"
    kinds = [s.kind for s in done.story.steps if not s.settle]
    assert kinds == ["request", "wait", "retry"], kinds
    slow = done.story.steps[0].action
    assert isinstance(slow, Slow) and slow.delay_ms >= 1000 + 8000


def test_only_a_jump_made_while_the_findings_key_ran_is_waited_out(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """A jump made while only another key's request ran needs no real time: the finding's key
    had no timer running then.  Waiting it out made confirmations last minutes (four waits of
    35 s for one finding of insert-after-work)."""
    other = Slow(id="o9", tenant="b", key=KeyPlan(name="k9", shape="plain"), delay_ms=1000,
                 body=BODY)
    story = hand_written(other, Clock(seconds=2, why="a little"), *TAKEOVER.actions())
    done = replay(story, ReplayConfig(target=reference("no-fencing", *SHORT_LEASE),
                                      report_dir=tmp_path, toxiproxy=toxiproxy_server))
    assert "P1" in done.story.properties and done.result.verdict == "fail"
    kinds = [s.kind for s in done.story.steps if not s.settle]
    assert kinds == ["request", "clock", "request", "wait", "retry"], kinds
    assert done.story.steps[0].action == other  # not slowed any longer: no wait ran through it


def test_a_finding_the_story_makes_without_its_jump_is_confirmed_without_waiting(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """key-only answers a retry 200 where the original was 201, jump or no jump: at seed 5,
    four reference flaws were first shown by a story with a jump made while the key's request
    ran, and each waited out a 30 s lease in real time to confirm what the story without its
    jump breaks at once.  Told so first, the story needs no wait, and it is the one kept."""
    story = hand_written(
        Slow(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), delay_ms=1000,
             body=BODY),
        Clock(seconds=35, why="past the lease of the running request"),
        Retry(id="o1", once_answered=True))
    done = replay(story, ReplayConfig(target=reference("key-only"), report_dir=tmp_path,
                                      toxiproxy=toxiproxy_server))
    assert "P3" in done.story.properties and done.result.verdict == "fail"
    kinds = [s.kind for s in done.story.steps if not s.settle]
    assert kinds == ["request", "retry"], kinds


def test_a_jump_too_long_to_wait_is_told_as_a_wait_just_past_the_lease(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """A takeover drawn with a jump of ten minutes while the original ran: the jump passed the
    lease on its way, so real time confirms it with a wait just past the lease (explore found
    no-fencing only with such jumps and reported nothing at four seeds)."""
    long_jump = hand_written(
        *TAKEOVER.actions()[:1], Clock(seconds=700, why="a few minutes"),
        *TAKEOVER.actions()[2:])
    done = replay(long_jump, ReplayConfig(target=reference("no-fencing", *SHORT_LEASE),
                                          report_dir=tmp_path, toxiproxy=toxiproxy_server))
    assert "P1" in done.story.properties and done.result.verdict == "fail"
    [wait] = [s.action for s in done.story.steps if isinstance(s.action, Wait)]
    assert 3 < wait.seconds < 10 and "the jump was 700 s" in wait.why


def test_a_finding_only_a_jump_shows_is_a_note_on_a_lease_renewed_while_it_runs(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """A service that renews its 4 s lease every second while the handler runs: a jump of 9 s
    lets the retry take over and charge a second time, real time never does."""
    renewed = corpus_target("renewed_lease")
    story = hand_written(
        Slow(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), delay_ms=1500,
             body={"amount": 100, "currency": "usd", "customer": "c"}),
        Clock(seconds=9, why="past the lease"),
        Retry(id="o1"))
    done = replay(story, ReplayConfig(target=renewed, report_dir=tmp_path,
                                      toxiproxy=toxiproxy_server))
    assert done.result.verdict == "pass", done.result.findings
    notes = [n.message for o in done.result.outcomes for n in o.notes]
    # Whether the retry met the lease before the next heartbeat renewed it is the machine's
    # timing; when it did, the second charge is told as seen only with a moved clock.
    took_over = any(e.f == "effects" and e.value.get("count") == 2
                    for o in done.result.outcomes for e in o.events)
    if took_over:
        assert any(n.startswith("seen only with a moved clock, not confirmed")
                   for n in notes), notes


def test_a_failed_request_whose_retry_was_lost_in_a_fault_is_retried_as_the_clients_settle(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """stored_errors stores the handler's 500 as the key's final answer; a retry lost in a
    connection reset left P9 (does the key converge after the error?) without an answer, and
    the exploration undecided.  The clients retry until the retry is answered too."""
    body = {"amount": 100, "currency": "usd", "customer": "c"}
    story = hand_written(
        HandlerFault(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"),
                     fault="exception", body=body),
        FaultOn(fault="request-reset"), Retry(id="o1"), FaultOff(fault="request-reset"))
    done = replay(story, ReplayConfig(target=corpus_target("stored_errors"),
                                      report_dir=tmp_path, toxiproxy=toxiproxy_server))
    outcome = done.result.outcomes[0]
    assert done.result.verdict == "pass", (done.result.findings, outcome.reason)
    retried = [e for e in outcome.events
               if e.f == "request" and e.type != "invoke" and e.label == "retry"]
    assert retried[-1].status == 500, retried  # the stored error, replayed


def test_the_commands_explore_then_replay_with_exit_codes_like_run(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    env = {**os.environ, "TOXIPROXY_URL": toxiproxy_server.url}

    def harness(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True,
                              text=True, env=env, timeout=180)

    found = harness("explore", "--reference", "--flaw", "key-only", "--max-examples", "30",
                    "--seed", "1", "--shrink-time", f"{SHRINK_SECONDS:g}s", "--first-only",
                    "--jobs", "1", "--report-dir",
                    str(tmp_path / "explore"))
    assert found.returncode == 1, found.stderr
    assert "state = IdempotencyMachine()" in found.stdout
    assert "Replay it: idem-harness replay" in found.stdout
    again = harness("replay", str(tmp_path / "explore" / "story.json"),
                    "--report-dir", str(tmp_path / "replay"))
    assert again.returncode == 1, again.stderr
    assert "reproduced" in again.stdout and "not reproduced" not in again.stdout
    missing = harness("replay", str(tmp_path / "nowhere.json"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr

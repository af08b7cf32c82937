"""The shortest story the gate prints under a finding, on hand-built histories judged by the real
checker: one variable per key however the header spelled it, the hook headers that made it
happen, requests that ran in the background, and the final charge count."""

from __future__ import annotations

import pytest

from harness import Finding, load_target
from harness._gate._story import render_story
from harness._history import NEMESIS
from harness._target import Target
from tests.harness.stories import JSON, Story, replayed

SLOW = {"X-Test-Delay-Ms": "1200"}


@pytest.fixture(scope="module")
def target() -> Target:
    return load_target("reference")


def finding(story: Story, prop: str) -> Finding:
    return next(f for f in story.check(prop).findings if f.property == prop)


def declarations(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("k")]


def test_one_key_is_one_variable_whatever_the_header_spelled(target: Target) -> None:
    story = Story()  # its requests send the key as an sf-string: "k-0002"
    story.history.record("info", "fault", NEMESIS, value={"fault": "response-timeout"})
    story.attempt("k-0002", None)
    story.history.record("info", "heal", NEMESIS, value={"fault": "response-timeout"})
    story.attempt("k-0002", 201, attempt=2, resource="ch_2", headers=JSON)
    story.effects("k-0002", 2, ids=["ch_1", "ch_2"])

    text = render_story(finding(story, "P1"), story.history.events(), target)

    (declared,) = declarations(text)
    assert declared.startswith("k1 = 'k-0002'") and 'sent as "k-0002", an sf-string' in declared
    assert "state.send(key=k1" in text and "state.retry(key=k1" in text
    assert "state.charges(key=k1)" in text and "k2" not in text


def test_the_zombie_story_starts_the_slowed_original_and_waits_for_it(target: Target) -> None:
    story = Story()
    original = story.history.invoke(
        "request", "c0", key="k1", tenant="t1", attempt=1, label="original", method="POST",
        path="/charges", fingerprint="fp-a", body='{"amount": 1}', key_header='"k1"',
        headers=SLOW)
    story.clock(31)
    story.attempt("k1", 201, attempt=2, label="takeover", resource="ch_2", headers=JSON)
    story.answer(original, 201, resource="ch_1", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])

    lines = render_story(finding(story, "P1"), story.history.events(), target).splitlines()

    started = next(n for n, line in enumerate(lines) if "send_in_background" in line)
    assert '"X-Test-Delay-Ms": "1200"' in lines[started]
    assert "its handler slowed by 1200 ms" in lines[started]
    steps = [line.split("  #")[0].strip() for line in lines[started:]]
    assert steps[:4] == [
        'o1 = state.send_in_background(key=k1, body=b1, headers={"X-Test-Delay-Ms": "1200"})',
        "state.advance_clock(seconds=31)", "state.retry(key=k1, body=b1)", "state.wait(o1)"]
    assert lines[started + 3].endswith("-> 201 ch_1")


def test_the_story_ends_with_the_final_charge_count_even_when_not_cited(target: Target) -> None:
    story = Story()
    story.attempt("k1", 201, resource="ch_1", digest="d1", headers=JSON)
    story.attempt("k1", 201, attempt=2, fingerprint="fp-b", label="reuse:body", resource="ch_1",
                  digest="d1", headers=replayed())
    story.effects("k1", 1, ids=["ch_1"])
    reuse = finding(story, "P4")
    assert not any(story.history[i].f == "effects" for i in reuse.events)

    lines = render_story(reuse, story.history.events(), target).splitlines()

    assert lines[-2].startswith("state.charges(key=k1)") and lines[-2].endswith("-> 1: ch_1")
    assert lines[-1] == "state.teardown()"


def test_a_crash_hook_is_part_of_the_request_that_carried_it(target: Target) -> None:
    story = Story()
    crashing = story.history.invoke(
        "request", "c0", key="k1", tenant="t1", attempt=1, label="crash:after-work",
        method="POST", path="/charges", fingerprint="fp-a", body='{"amount": 1}',
        key_header='"k1"', headers={"X-Test-Fault": "crash-after-work"})
    story.lose(crashing, "disconnected")
    story.crash()
    story.attempt("k1", 201, attempt=2, resource="ch_2", headers=JSON)
    story.effects("k1", 2, ids=["ch_1", "ch_2"])

    text = render_story(finding(story, "P1"), story.history.events(), target)

    assert ('state.send(key=k1, body=b1, headers={"X-Test-Fault": "crash-after-work"})'
            in text)
    assert "set to kill the server after-work" in text

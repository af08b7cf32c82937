"""The story file: its shape (what the HTML report renders), the checks that run before a
replay, and the messages a damaged or misplaced file gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import UsageError, load_target
from harness._history import ORACLE, History
from harness.explore import Story, StoryStep, load_story, render_story
from harness.explore._actions import Clock, FaultOff, FaultOn
from harness.explore._keys import KeyPlan
from harness.explore._steps import StepRecord
from harness.explore._story import Provenance, story_of
from harness.http.explore._actions import Action, NewRequest, Retry
from harness.http.explore._validity import problems_with

BODY = {"amount": 100, "currency": "usd"}
REQUEST = NewRequest(id="o1", tenant="a", key=KeyPlan(name="k1", shape="plain"), body=BODY)


def story(*actions: Action, **known: object) -> Story:
    steps = [StoryStep(number=n, kind="request", text=a.text(), response="201 ch_1",
                       effects=1, action=a) for n, a in enumerate(actions, start=1)]
    return Story.model_validate({"seed": 7, "examples": 3, "seconds": 1.5, "steps": steps,
                                 "target": "reference-server", "operations": len(steps),
                                 **known})


def test_the_saved_file_has_the_shape_the_html_report_reads(tmp_path: Path) -> None:
    saved = story(REQUEST, Retry(id="o1"), property="P1", properties=["P1"], message="2 charges",
                  broke_at=2, evidence=[1, 2])
    path = tmp_path / "story.json"
    path.write_text(saved.to_json())
    data = json.loads(path.read_text())
    assert {"seed", "examples", "seconds", "property", "message", "target", "steps"} <= set(data)
    assert (data["seed"], data["examples"], data["property"]) == (7, 3, "P1")
    for step in data["steps"]:
        assert {"number", "kind", "text", "response", "effects"} <= set(step)
    assert load_story(path).actions() == [REQUEST, Retry(id="o1")]


def test_the_printed_story_reads_like_hypothesis_then_says_what_broke_and_where() -> None:
    text = render_story(story(REQUEST, Retry(id="o1"), property="P1", properties=["P1", "P2"],
                              message="2 charges for key k1", broke_at=2, evidence=[1, 2]),
                        replay_line="idem-harness replay story.json")
    lines = text.splitlines()
    assert "state = IdempotencyMachine()" in lines[2]
    assert lines[3].strip().startswith("1  o1 = state.request(k1")
    assert "P1 (safety) broke at step 2: 2 charges for key k1" in text
    assert "Also broken: P2." in text
    assert "The steps that mattered: 1 and 2" in text
    assert text.rstrip().endswith("Replay it: idem-harness replay story.json")


def test_without_evidence_the_story_says_nothing_about_which_step_mattered() -> None:
    text = render_story(story(REQUEST, property="P7", properties=["P7"], message="m"))
    assert "mattered" not in text


@pytest.mark.parametrize(("content", "expected"), [
    (None, "does not exist"),
    ("{not json", "not a readable JSON story"),
    ('{"seed": 1}', "is not an idem-harness story"),
    ('{"format": "idem-harness-story", "seed": 1, "examples": 1, "seconds": 1, "target": "t",'
     ' "steps": [{"number": 1, "kind": "retry", "text": "x", "action": {"op": "retyr"}}]}',
     "steps.0.action"),
])
def test_a_file_that_is_not_a_story_is_refused_with_the_reason(
        tmp_path: Path, content: str | None, expected: str) -> None:
    path = tmp_path / "story.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=expected):
        load_story(path)


def test_a_story_that_cannot_run_against_a_target_says_every_reason_first() -> None:
    bare = load_target("reference").model_copy(update={"hooks": load_target(
        "reference").hooks.model_copy(update={"clock": None})})
    problems = problems_with([Retry(id="o1"), Clock(seconds=60), FaultOff(fault="proxy-down"),
                              FaultOn(fault="gremlins")], bare)
    assert any("names operation o1, which no earlier step made" in p for p in problems)
    assert any("lacks a clock the harness can move" in p for p in problems)
    assert any("heals a fault that is not on" in p for p in problems)
    assert any("unknown fault 'gremlins'" in p for p in problems)
    assert problems_with([REQUEST, Retry(id="o1")], load_target("reference")) == []


def test_the_story_ends_with_the_charges_each_key_ended_with() -> None:
    """Step 2 saw one charge; the late original's came after it: the end says two."""
    history = History()
    history.record("ok", "effects", ORACLE, tenant="a", key="k-real", value={"count": 1})
    history.record("ok", "effects", ORACLE, tenant="a", key="k-real", value={"count": 2})
    steps = [StepRecord(1, "request", REQUEST.text(), REQUEST, "201 ch_1", 0,
                        identity=("a", "k-real")),
             StepRecord(2, "retry", Retry(id="o1").text(), Retry(id="o1"), "201 ch_2", 1,
                        identity=("a", "k-real"))]
    saved = story_of(steps, None, target=load_target("reference"),
                     found=Provenance(seed=7, examples=3, seconds=1.5),
                     events=history.events())
    assert saved.charges == {"k1": 2}

    lines = render_story(saved).splitlines()
    end = lines.index("     state.teardown()")
    assert lines[end + 1] == "     state.charges(k1)  # → 2 charges at the end"


def test_a_story_saved_before_the_charges_were_kept_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "story.json"
    data = json.loads(story(REQUEST).to_json())
    del data["charges"]
    path.write_text(json.dumps(data))
    assert load_story(path).charges == {}

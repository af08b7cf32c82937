"""The failing story: what the console prints, what ``story.json`` holds, what replay reads.

One file serves the HTML report and ``idem-harness replay``: each step has the fields a reader
sees (number, kind, text, response, effects) and, for the drawn steps, the ``action`` that
performs it again; ``charges`` holds what each key ended with, once every client had settled.
Keys are stored by shape, not by value, so a replay makes fresh ones.  ``front`` says whose
actions the steps are: the kind of target whose front end drew it (``harness._front``); the
story model is generic in them, and ``load_story`` reads each step's action in its own front's
vocabulary (``Front.story_actions``).  Hypothesis's own
``@reproduce_failure`` blob only works with the Hypothesis version that made it; this file is
the durable reproduction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Generic, Literal, TypeVar

from hypothesis import __version__ as HYPOTHESIS_VERSION
from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from harness._errors import UsageError
from harness._front import DEFAULT_KIND, FRONTS, front_for, front_named
from harness._history import Event
from harness._target import Target
from harness.explore._distinct import Kind, label
from harness.explore._failure import Failure
from harness.explore._steps import StepRecord
from harness.judging._analysis import Identity
from harness.judging._checker import CheckResult
from harness.judging._findings import Finding, klass_of
from harness.reports import write_atomic
from harness.targets._loader import saved_target

__all__ = [
    "FORMAT",
    "Front",
    "Provenance",
    "Story",
    "StoryStep",
    "clear_stories",
    "failure_story",
    "load_story",
    "render_story",
    "save_story",
    "story_file",
    "story_heading",
    "story_of",
]

FORMAT = "idem-harness-story"


def _a_kind(value: Any) -> Any:
    """A story's ``front`` names a front end's kind (``FRONTS``), refused as a literal is."""
    if isinstance(value, str) and value in FRONTS:
        return value
    kinds = [repr(kind) for kind in FRONTS]
    expected = f"{', '.join(kinds[:-1])} or {kinds[-1]}" if len(kinds) > 1 else kinds[0]
    raise PydanticCustomError("literal_error", "Input should be {expected}",
                              {"expected": expected})


#: Whose actions a story's steps are: the kind of target whose front end drew it.
Front = Annotated[str, BeforeValidator(_a_kind)]
#: A step's action as the story model holds it (unparametrised: whatever action was given).
_Action = TypeVar("_Action")


class StoryStep(BaseModel, Generic[_Action]):
    """One step as saved: what a reader sees and, unless the clients were settling, the action
    a replay performs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int
    kind: str
    text: str
    response: str | None = None
    effects: int | None = None
    settle: bool = False
    action: _Action | None = None


class Story(BaseModel, Generic[_Action]):
    """A story and what is known about it: how it was found, what broke, where."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    format: Literal["idem-harness-story"] = "idem-harness-story"
    version: Literal[1] = 1
    front: Front = DEFAULT_KIND
    #: The state machine the story prints as (Hypothesis's ``state = ...Machine()``).
    machine: str = "IdempotencyMachine"
    seed: int
    examples: int
    seconds: float
    runs: int = 0
    total_seconds: float = 0.0
    property: str | None = None
    properties: list[str] = []
    #: The kinds (property and mechanism, ``_distinct``) it is kept for: what makes it a
    #: failure of its own beside the exploration's others.
    kinds: list[str] = []
    message: str = ""
    target: str
    target_definition: dict[str, Any] | None = None
    broke_at: int | None = None
    evidence: list[int] = []
    operations: int = 0
    keys: dict[str, str] = {}
    charges: dict[str, int] = {}
    #: False when the exploration was interrupted before shrinking ended: the story failed,
    #: but a shorter one may exist.
    shrunk: bool = True
    hypothesis: str = HYPOTHESIS_VERSION
    steps: list[StoryStep[_Action]]

    def actions(self) -> list[_Action]:
        """The drawn steps, in order: exactly what a replay performs before settling."""
        return [s.action for s in self.steps if not s.settle and s.action is not None]

    def saved_target(self) -> Target:
        """The target the story ran against, as it was then."""
        if self.target_definition is None:
            raise UsageError(f"the story does not say how to reach {self.target}; give "
                             "--target FILE or --reference")
        return saved_target(self.target_definition)

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def _legend(steps: Sequence[StepRecord[Any]]) -> dict[str, str]:
    legend: dict[str, str] = {}
    for step in steps:
        plan = getattr(step.action, "key", None)
        if plan is not None and plan.shape is not None and plan.name not in legend:
            legend[plan.name] = plan.describe()
    return legend


def _final_charges(steps: Sequence[StepRecord[Any]],
                   events: Sequence[Event]) -> dict[str, int]:
    """Each key the story sent, by its name in the story, with the oracle's last count for
    it: how many charges the story ended with (a name used in two tenants says which)."""
    names: dict[Identity, str] = {}
    for step in steps:
        plan = getattr(step.action, "key", None)
        if step.identity is not None and plan is not None and step.identity[1] is not None:
            names.setdefault(step.identity, plan.name)
    last = {e.identity: e for e in events if e.f == "effects" and e.type == "ok"}
    shared = {n for n in names.values() if list(names.values()).count(n) > 1}
    charges: dict[str, int] = {}
    for identity, name in names.items():
        if identity in last:
            shown = f"{name} as {identity[0]}" if name in shared and identity[0] else name
            charges[shown] = int(last[identity].value.get("count", 0))
    return charges


def _evidence(finding: Finding | None, steps: Sequence[StepRecord[Any]]) -> list[int]:
    """The steps whose events the checker cites: the ones that mattered."""
    if finding is None:
        return []
    return [s.number for s in steps if any(s.holds(i) for i in finding.events)]


@dataclass(frozen=True)
class Provenance:
    """How a story was found: the seed, the examples and seconds until the first failure,
    and all the examples and seconds the search took (shrinking included)."""

    seed: int
    examples: int
    seconds: float
    runs: int = 0
    total_seconds: float = 0.0


def story_of(steps: Sequence[StepRecord[Any]], check: CheckResult | None, *, target: Target,
             found: Provenance, broke_at: int | None = None, error: str | None = None,
             events: Sequence[Event] = (), shrunk: bool = True,
             kinds: Sequence[Kind] = ()) -> Story[Any]:
    """The story of ``steps``, judged by ``check`` (or stopped by ``error``); ``events`` (its
    history) gives the charges it ended with.  The story names its front end (``front``), so
    that ``load_story`` reads its actions in that front end's vocabulary."""
    front = front_for(target).explorer()
    findings = check.findings if check else []
    first = findings[0] if findings else None
    message = first.message if first else (error or "the checker found nothing")
    return Story(
        front=front.name, machine=front.machine,
        seed=found.seed, examples=found.examples, seconds=round(found.seconds, 3),
        runs=found.runs, total_seconds=round(found.total_seconds, 3),
        property=first.property if first else None,
        properties=sorted({f.property for f in findings}, key=lambda p: int(p[1:])),
        kinds=label(kinds).split(", ") if kinds else [], message=message, target=target.name,
        target_definition=target.model_dump(mode="json"),
        broke_at=broke_at, evidence=_evidence(first, steps),
        operations=sum(1 for s in steps if not s.settle), keys=_legend(steps),
        charges=_final_charges(steps, events), shrunk=shrunk,
        steps=[StoryStep(number=s.number, kind=s.kind, text=s.text, response=s.response,
                         effects=s.effects, settle=s.settle,
                         action=None if s.settle else s.action) for s in steps],
    )


def failure_story(failure: Failure[Any], *, target: Target, found: Provenance,
                  shrunk: bool = True) -> Story[Any]:
    return story_of(failure.steps, failure.check, target=target, found=found,
                    broke_at=failure.broke_at, error=failure.error, events=failure.events,
                    shrunk=shrunk, kinds=tuple(failure.new or failure.kinds))


def story_file(number: int = 1) -> str:
    """The ``number``-th story's file name: ``story.json``, then ``story-2.json``..."""
    return "story.json" if number == 1 else f"story-{number}.json"


def clear_stories(report_dir: Path | None) -> None:
    """Remove the story files an earlier exploration left in ``report_dir``: a directory
    given again must not show another run's failures beside this one's."""
    if report_dir is None:
        return
    for path in report_dir.glob("story*.json"):
        if path.name == "story.json" or path.name.removeprefix("story-").removesuffix(
                ".json").isdigit():
            path.unlink(missing_ok=True)


def save_story(story: Story[Any], report_dir: Path | None, *, number: int = 1) -> Path | None:
    """Write ``story`` as the report directory's ``number``-th story file (``story_file``);
    where it went, if anywhere."""
    if report_dir is None:
        return None
    path = report_dir / story_file(number)
    write_atomic(path, story.to_json())
    return path


def _vocabulary(front: object) -> Any:
    """The actions a story of ``front`` is made of (its front end's, imported only when read;
    a kind no front end drives reads as the default one's, and the story is refused for it)."""
    return front_named(front if isinstance(front, str) and front in FRONTS
                       else DEFAULT_KIND).story_actions()


def load_story(path: Path) -> Story[Any]:
    """Read a story file, or say exactly what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist; give the story.json that "
                         "`idem-harness explore` wrote in its report directory") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"{path} is not a readable JSON story file ({exc}); give the "
                         "story.json that `idem-harness explore` wrote") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{path} is not an idem-harness story (its \"format\" must be "
                         f"{FORMAT!r}); give the story.json that `idem-harness explore` wrote")
    model: Any = Story[_vocabulary(data.get("front", "http"))]  # type: ignore[misc]
    try:
        story: Story[Any] = model.model_validate(data)
        return story
    except ValidationError as exc:
        problems = "\n".join(
            f"  {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise UsageError(f"{path} is damaged:\n{problems}\n  fix: correct those fields, or run "
                         "`idem-harness explore` again to save a fresh story") from exc


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _step_lines(step: StoryStep[Any], indent: str) -> list[str]:
    lines = [f"{step.number:>3}  {indent}{step.text}"]
    outcome = [step.response] if step.response else []
    if step.effects is not None:
        outcome.append(_plural(step.effects, "charge"))
    if outcome:
        lines.append(f"     {indent}  → {' · '.join(outcome)}")
    return lines


def _listing(numbers: Sequence[int]) -> str:
    shown = [str(n) for n in numbers]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} and {shown[-1]}"


def story_heading(story: Story[Any], number: int, of: int) -> str:
    """The line above the ``number``-th of ``of`` stories an exploration kept: which failure it
    is, how it was found, and whether shrinking ran to its end (empty: the usual heading)."""
    if of == 1 and story.shrunk:
        return ""
    found = (f"found after {_plural(story.examples, 'example')} in {story.seconds:.1f} s, "
             f"seed {story.seed}")
    which = f"Failure {number} of {of}" + (f" ({', '.join(story.kinds)})" if story.kinds else "")
    shape = (f"shortest story ({_plural(story.operations, 'step')})" if story.shrunk else
             f"story ({_plural(story.operations, 'step')}), not shrunk to the end (the "
             "exploration was stopped)")
    return f"{which}, {shape}, {found}:"


def render_story(story: Story[Any], *, replay_line: str = "", heading: str = "") -> str:
    """The story as Hypothesis would print it: the steps, then what broke and where."""
    found = (f"found after {_plural(story.examples, 'example')} in {story.seconds:.1f} s, "
             f"seed {story.seed}")
    lines = [heading or f"Shortest failing story ({_plural(story.operations, 'step')}), {found}:",
             "", f"     state = {story.machine}()"]
    drawn = [s for s in story.steps if not s.settle]
    settled = [s for s in story.steps if s.settle]
    for step in drawn:
        lines += _step_lines(step, "")
    lines.append("     state.teardown()" + ("  # then, as careful clients:" if settled else ""))
    for step in settled:
        lines += _step_lines(step, "  ")
    lines += [f"     state.charges({name})  # → {_plural(count, 'charge')} at the end"
              for name, count in story.charges.items()]
    if story.keys:
        lines += ["", *(f"     {description}" for description in story.keys.values())]
    lines.append("")
    if story.property is None:
        lines.append(story.message)
    else:
        where = (f"at step {story.broke_at}" if story.broke_at is not None
                 else "once the clients had settled")
        lines.append(f"{story.property} ({klass_of(story.property)}) broke {where}: "
                     f"{story.message}")
        others = [p for p in story.properties if p != story.property]
        if others:
            lines.append(f"Also broken: {', '.join(others)}.")
        if story.kinds:
            lines.append(f"A failure of its own as: {', '.join(story.kinds)}.")
        if story.evidence:
            lines.append(f"The steps that mattered: {_listing(story.evidence)} (the checker's "
                         "evidence).")
    if replay_line:
        lines.append(f"Replay it: {replay_line}")
    return "\n".join(lines) + "\n"

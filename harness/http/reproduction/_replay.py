"""Playing a reproduction's story again through the harness, and saying whether it broke again.

The story is played as a scenario, so the runner deploys the target, records, collects the
effects and judges as in any run.  Each step goes out at the moment it went out in the run,
measured from the story's first; a request that was still running when the run's next step
began runs in the background (a slow original that a retry, a clock jump or a kill must meet),
and where the run waited until the target reported a key in progress, the replay waits for that
too (or until the requests in the background are over).  Requests the run released together go
out together, through a barrier.
A race the run lost can go the other way: the verdict says so rather than call a flaw fixed.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from harness._history import NEMESIS, ORACLE, Event
from harness._outcomes import Handler, RunResult, ScenarioOutcome
from harness._runner import RunConfig, run_scenarios
from harness._scenario import Scenario
from harness._target import Target
from harness.evidence._oracle import record_effects, record_total
from harness.http._client import Request
from harness.http._context import ScenarioContext
from harness.http._nemesis import fault_named
from harness.http.reproduction._reproduction import (
    NO_REPLAY,
    NOT_REPRODUCED,
    REPRODUCED,
    Reproduction,
)
from harness.judging._findings import Finding
from harness.services._commit_proxy import AfterWrite, StoreFault

__all__ = ["Replayed", "cannot_play", "replay_reproduction", "story_scenario", "timing_notes"]

#: Requests invoked within this many seconds of each other, all still running together, were
#: released at once in the run (a barrier): they go out at once again.
AT_ONCE = 0.01
#: How long the step after a background request waits for the target to report it in progress.
IN_PROGRESS_WAIT = 5.0
#: The longest head start a race's winners get over its losers when the target cannot report
#: a key in progress.
HEAD_START = 0.3


@dataclass(frozen=True)
class _Send:
    """A group of requests to send, released together, and whether the story goes on while
    they run; ``strikes``: where the store proxy struck at one's write (by invoke index)."""

    invokes: tuple[Event, ...]
    timeouts: tuple[float, ...]
    background: bool
    strikes: Mapping[int, AfterWrite] = field(default_factory=dict)
    #: The invokes (by index) the run's target told "in progress": they leave once the others
    #: hold the key, so the replay's race has the run's winner.
    losers: frozenset[int] = frozenset()
    #: How long the winners' head start is when the target cannot report a key in progress.
    head_start: float = 0.0
    #: The slow hook's milliseconds, by invoke index, for a request the run held longer than
    #: it asked (a loaded machine): the replay holds it at least as long.
    stretched: Mapping[int, int] = field(default_factory=dict)


def _strikes(events: Sequence[Event]) -> tuple[dict[int, AfterWrite], set[int]]:
    """The faults the store proxy struck at a request's write (a cut, a hold, a kill right
    after the Nth committed write), by the index of the request's invoke, and the events the
    replay does not play on their own because the strike does them again (the strike, its
    heal, the restart after a kill)."""
    invokes = [e for e in events if e.f == "request" and e.type == "invoke"]
    plans: dict[int, AfterWrite] = {}
    absorbed: set[int] = set()
    for position, event in enumerate(events):
        value = event.value
        if event.process != NEMESIS or "after_write" not in value:
            continue
        absorbed.add(event.index)
        if event.f not in ("fault", "crash"):
            continue  # its heal
        # The key's latest request sent before it: the strike may be recorded only after the
        # client saw its connection go.
        struck = next((i for i in reversed(invokes)
                       if i.key == event.key and i.time <= event.time), None)
        if struck is None:
            continue
        fault = str(value.get("fault", "cut-after-write")).removesuffix("-after-write")
        plans[struck.index] = AfterWrite(int(value["after_write"]), cast(StoreFault, fault),
                                         float(value.get("hold", 0.0)))
        if event.f == "crash":  # send_watched starts the killed target again itself
            restart = next((e for e in events[position + 1:] if e.f == "restart"), None)
            if restart is not None:
                absorbed.add(restart.index)
    return plans, absorbed


def _plan(events: Sequence[Event], target: Target) -> list[tuple[float, _Send | Event]]:
    """The story's steps with their offsets from its first: groups of requests, and nemesis
    and oracle events to play again."""
    completions = {e.op: e for e in events if e.f == "request" and e.type != "invoke"}
    strikes, absorbed = _strikes(events)
    steps = [e for e in events if (e.f != "request" or e.type == "invoke")
             and e.index not in absorbed]
    if not steps:
        return []
    origin = steps[0].time
    planned: list[tuple[float, _Send | Event]] = []
    position = 0
    while position < len(steps):
        first = steps[position]
        if first.f != "request":
            planned.append((first.time - origin, first))
            position += 1
            continue
        group = [first]
        while (position + len(group) < len(steps)
               and _released_with(steps[position + len(group)], group, completions)):
            group.append(steps[position + len(group)])
        position += len(group)
        following = steps[position].time if position < len(steps) else float("inf")
        ends = [completions[e.op].time if e.op in completions else float("inf") for e in group]
        timeouts = tuple(_timeout(e, completions.get(e.op), target) for e in group)
        losers, head_start = _race_losers(group, completions, target)
        background = any(end > following for end in ends)
        stretched = {e.index: ms for e in group if background
                     and (ms := _held_for(e, completions.get(e.op), target)) is not None}
        planned.append((first.time - origin,
                        _Send(tuple(group), timeouts, background,
                              {e.index: strikes[e.index] for e in group if e.index in strikes},
                              losers, head_start, stretched)))
    return planned


def _slow_ms(invoke: Event, target: Target) -> int | None:
    """The milliseconds the slow hook asked of this request, as its header says; None when it
    carried none (or the value cannot be read back)."""
    slow = target.hooks.slow
    if slow is None:
        return None
    sent = next((v for k, v in (invoke.headers or {}).items()
                 if k.lower() == slow.header.lower()), None)
    head, _, tail = slow.value.partition("{ms}")
    if sent is None or not sent.startswith(head) or not sent.endswith(tail):
        return None
    digits = sent[len(head):len(sent) - len(tail)]
    return int(digits) if digits.isdigit() else None


def _held_for(invoke: Event, completion: Event | None, target: Target) -> int | None:
    """The slow hook's milliseconds that hold this request (one later steps met running) as
    long as the run observed it running, when that is longer than the run asked: under load a
    request slowed 1250 ms took 2.7 s, and the clock jump and the retry that met it running in
    the run met it finished in the replay.  None when nothing needs stretching."""
    asked = _slow_ms(invoke, target)
    if asked is None or completion is None or completion.status is None:
        return None
    observed = math.ceil((completion.time - invoke.time) * 1000)
    return observed if observed > asked else None


#: A request the run observed running at least this long, which the replay cannot hold again,
#: is said up front: on a quiet machine it may finish before a step that met it running.
LONG_REQUEST = 0.5


def timing_notes(events: Sequence[Event], target: Target) -> list[str]:
    """What the replay cannot time as the run did, said before it plays: each request that
    ran in the background of later steps for long in the run, held by no slow hook the
    replay could stretch."""
    notes = []
    for _, step in _plan(events, target):
        if not isinstance(step, _Send) or not step.background:
            continue
        for invoke in step.invokes:
            completion = next((e for e in events if e.op == invoke.op and e.f == "request"
                               and e.type != "invoke"), None)
            if completion is None or completion.status is None:
                continue
            took = completion.time - invoke.time
            if took >= LONG_REQUEST and _slow_ms(invoke, target) is None:
                hold = ("the target has no slow hook ([hooks.slow])" if target.hooks.slow is None
                        else "it carried no slow hook")
                notes.append(
                    f"the run's request {invoke.attempt or '?'} of key {invoke.key} ran "
                    f"{took:.1f} s while later steps met it running, and the replay cannot "
                    f"hold it that long ({hold}): on a quieter machine it may finish sooner, "
                    "and a step that met it running may not")
    return notes


def _race_losers(group: Sequence[Event], completions: Mapping[int, Event],
                 target: Target) -> tuple[frozenset[int], float]:
    """Which of requests released together the run's target told "in progress", and the
    head start the others get when the target cannot say it holds their key (half the
    quickest winner's running time, at most ``HEAD_START``).  Released at once again, the
    race can go the other way: the other body wins the key, and the story that follows (a
    retry of the loser meeting the winner's response) is another story.  Nothing when all
    or none of them were told it."""
    said = {e.index for e in group if e.op in completions
            and target.promises.says_in_progress(completions[e.op].status)}
    if not said or len(said) == len(group):
        return frozenset(), 0.0
    took = [completions[e.op].time - e.time for e in group
            if e.index not in said and e.op in completions]
    return frozenset(said), min([HEAD_START, *(t / 2 for t in took)])


def _released_with(candidate: Event, group: Sequence[Event],
                   completions: Mapping[int, Event]) -> bool:
    """Was ``candidate`` released together with ``group``: a request invoked within
    ``AT_ONCE`` of the group's first while every one of them still ran?  One sent right after
    another's answer came is the next step, not its twin: a replay that sent a fast server's
    key-reuse requests together met "in progress" and did not reproduce."""
    if candidate.f != "request" or candidate.time - group[0].time > AT_ONCE:
        return False
    return all(e.op not in completions or completions[e.op].time > candidate.time
               for e in group)


def _timeout(invoke: Event, completion: Event | None, target: Target) -> float:
    """How long the replay's client waits for this request: as long as the run's did when it
    gave up (a fault's short timeout), else long enough for a request slowed on purpose."""
    if completion is None:
        return target.client.timeout
    took = completion.time - invoke.time
    if completion.error == "timeout":
        return max(took, 0.05)
    return max(target.client.timeout, took + 5.0)


class _Player:
    """Plays one story against a scenario context, as its ``run``."""

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = events
        self.errors: list[BaseException] = []

    def __call__(self, context: ScenarioContext) -> None:
        instances = 1 + max((int(e.value.get("instance", 0) or 0) for e in self.events
                             if e.f in ("request", "crash", "restart")), default=0)
        if instances > 1:
            context.ensure_instances(instances)
        running: list[threading.Thread] = []
        started = time.monotonic()
        for at, step in _plan(self.events, context.target):
            time.sleep(max(0.0, started + at - time.monotonic()))
            if isinstance(step, _Send):
                threads = self._send(context, step)
                if step.background:
                    running += threads
                else:
                    for thread in threads:
                        thread.join()
            elif step.f == "in-progress":  # the run waited until the target had the request
                self._until_in_progress(context, running)
            else:
                self._act(context, step)
        for thread in running:
            thread.join()
        if self.errors:
            raise self.errors[0]

    def _send(self, context: ScenarioContext, step: _Send) -> list[threading.Thread]:
        """Release the group's requests together; where the run's target told some of them
        "in progress", the others first and those once the target holds the key."""
        pairs = list(zip(step.invokes, step.timeouts, strict=True))
        winners = [p for p in pairs if p[0].index not in step.losers]
        losers = [p for p in pairs if p[0].index in step.losers]
        threads = self._release(context, step, winners)
        if losers:
            if not self._until_in_progress(context, threads):
                time.sleep(step.head_start)
            threads += self._release(context, step, losers)
        return threads

    def _release(self, context: ScenarioContext, step: _Send,
                 pairs: Sequence[tuple[Event, float]]) -> list[threading.Thread]:
        barrier = threading.Barrier(len(pairs))

        def send(invoke: Event, timeout: float) -> None:
            instance = int(invoke.value.get("instance", 0) or 0)
            try:
                barrier.wait(timeout=30)
                plan = step.strikes.get(invoke.index)
                if plan is not None:  # the store proxy strikes at its write again
                    context.send_watched(_request(invoke, step.stretched.get(invoke.index),
                                                  context.target),
                                         plan=plan, process=invoke.process, instance=instance)
                    return
                context.client.send(_request(invoke, step.stretched.get(invoke.index),
                                             context.target), process=invoke.process,
                                    attempt=invoke.attempt or 1, timeout=timeout,
                                    instance=instance)
            except BaseException as exc:  # raised in the scenario's thread at the end
                self.errors.append(exc)

        threads = [threading.Thread(target=send, args=pair, daemon=True) for pair in pairs]
        for thread in threads:
            thread.start()
        return threads

    @staticmethod
    def _until_in_progress(context: ScenarioContext, threads: Sequence[threading.Thread]) -> bool:
        """The run went on once the target reported a request in progress: wait for that too
        (or until the requests running in the background are over), and record it again.
        Whether the target said so (False too when it cannot say)."""
        hook = context.target.hooks.store_size
        if hook is None or not hook.in_progress:
            return False
        deadline = time.monotonic() + IN_PROGRESS_WAIT
        while time.monotonic() < deadline and any(t.is_alive() for t in threads):
            seen = context.deployment.store_size().get("in_progress", 0)
            if seen > 0:
                context.history.record("ok", "in-progress", ORACLE, value={"in_progress": seen})
                return True
            time.sleep(0.01)
        return False

    @staticmethod
    def _act(context: ScenarioContext, event: Event) -> None:
        value = event.value
        instance = value.get("instance")
        nemesis = context.nemesis
        if event.f in ("fault", "heal"):
            fault = fault_named(str(value.get("fault")))
            (nemesis.inject if event.f == "fault" else nemesis.heal)(fault, instance=instance)
        elif event.f == "crash":
            how, number = str(value.get("how", "SIGKILL")), int(instance or 0)
            if how == "SIGKILL":
                nemesis.kill(number)
            else:  # the target's own crash hook, fired by the request before
                context.deployment.wait_for_exit(number, timeout=10)
                nemesis.crashed(how, number)
        elif event.f == "restart":
            nemesis.restart(int(instance or 0))
        elif event.f == "clock":
            context.advance_clock(float(value.get("seconds", 0.0)))
        elif event.f == "lease-not-waited":
            context.history.record("info", "lease-not-waited", NEMESIS, key=event.key,
                                   tenant=event.tenant, value=dict(value))
        elif event.f == "store-size" and context.target.hooks.store_size is not None:
            context.observe_store_size()
        elif event.f == "effects" and context.deployment.oracle is not None:
            record_effects(context.history, context.deployment.oracle, event.tenant, event.key)
        elif event.f == "effects-total" and context.deployment.oracle is not None:
            record_total(context.history, context.deployment.oracle)


def _request(invoke: Event, held_ms: int | None = None,
             target: Target | None = None) -> Request:
    """The request as the run sent it: its body, its key header verbatim, every header; with
    ``held_ms`` its slow hook asks that long instead (the time the run observed)."""
    headers = dict(invoke.headers or {})
    slow = target.hooks.slow if target is not None else None
    if held_ms is not None and slow is not None:
        headers = {k: v for k, v in headers.items() if k.lower() != slow.header.lower()}
        headers[slow.header] = slow.value.replace("{ms}", str(held_ms))
    return Request(key=invoke.key, tenant=invoke.tenant,
                   raw_body=(invoke.body or "").encode(), method=invoke.method,
                   path=invoke.path, key_header=invoke.key_header,
                   headers=headers, label=invoke.label or "")


def story_scenario(reproduction: Reproduction) -> Scenario:
    """The story as a scenario of the same name, judged on the properties it is about."""
    events = reproduction.events
    return Scenario(
        name=reproduction.scenario,
        summary=f"the story of {reproduction.key or 'a finding'}, played again",
        story="", properties=reproduction.properties, plan=(), run=_Player(events),
        applies=lambda target: cannot_play(events, target),
    )


def cannot_play(events: Sequence[Event], target: Target) -> str | None:
    """Why this target cannot play the story: what the story does that only a target the
    harness starts itself allows."""
    done = {e.f for e in events}
    if done & {"crash", "restart"} and not target.can_restart:
        return ("the story kills and restarts the target, which the harness can only do to a "
                "target it starts itself: run the script without BASE_URL")
    if "clock" in done and not target.moves_clock:
        return ("the story moves the target's clock, and this target offers no way to: run the "
                "script without BASE_URL, or give an instance with its clock hook")
    if target.store_proxy is None and any(
            e.f == "fault" and e.value.get("where") == "store" for e in events):
        return ("the story cuts the target's database connection, which the harness can only "
                "do to a target it starts itself: run the script without BASE_URL")
    instances = {int(e.value.get("instance", 0) or 0) for e in events if e.f == "request"}
    if len(instances) > 1 and not target.shares_state:
        return ("the story sends to several processes of the target, which the harness can only "
                "start itself: run the script without BASE_URL")
    return None


@dataclass(frozen=True)
class Replayed:
    """The replay's run, and what it says about the reproduction: an exit code and a line."""

    result: RunResult
    exit_code: int
    verdict: str


def replay_reproduction(reproduction: Reproduction, target: Target, *, report_dir: Path,
                        handlers: Sequence[Handler] = (),
                        run: Callable[[RunConfig, Sequence[Handler]], RunResult] = run_scenarios,
                        ) -> Replayed:
    """Play ``reproduction`` against ``target`` (started afresh by the runner) and judge it."""
    if reproduction.plays_scenario:
        from scenarios import get_scenario  # the catalog, only for a whole scenario

        scenario = get_scenario(reproduction.scenario)
    else:
        scenario = story_scenario(reproduction)
    result = run(RunConfig(target=target, scenarios=[scenario], report_dir=report_dir,
                           seed=reproduction.seed), handlers)
    code, verdict = _verdict(reproduction, result)
    return Replayed(result, code, verdict)


def _verdict(reproduction: Reproduction, result: RunResult) -> tuple[int, str]:
    wanted = reproduction.properties
    if not result.outcomes:
        return NO_REPLAY, "no verdict: the replay stopped before the story was played"
    outcome: ScenarioOutcome = result.outcomes[0]
    if outcome.verdict == "n/a":
        return NO_REPLAY, f"no verdict: the story cannot be played here: {outcome.reason}"
    again: list[Finding] = [f for f in outcome.findings if f.property in wanted]
    if again:
        found = ", ".join(dict.fromkeys(f.property for f in again))
        lines = [f"  {f.property}: {f.message}" for f in again[:5]]
        more = [f"  ... and {len(again) - 5} more"] if len(again) > 5 else []
        return REPRODUCED, "\n".join([f"reproduced: {found} broke again in {outcome.name}:",
                                      *lines, *more])
    check = outcome.check
    undecided = [f"{p}: {check.results[p].reason}" for p in wanted
                 if check is not None and p in check.results
                 and check.results[p].verdict == "unknown"]
    if check is None or outcome.reason or undecided:
        why = "; ".join([*([outcome.reason] if outcome.reason else []), *undecided])
        return NO_REPLAY, f"no verdict: the replay could not judge {', '.join(wanted)}: {why}"
    return NOT_REPRODUCED, (
        f"not reproduced this time: {outcome.name} came out {outcome.verdict} (no finding of "
        f"{', '.join(wanted)}). A race the run lost can go the other way: run the script again "
        "before calling the flaw fixed.")

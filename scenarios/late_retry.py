"""Retries hours later: replayed inside the retention window, new outside it, and the window
measured."""

from __future__ import annotations

from dataclasses import replace

from harness import COPIES_MET, RetryPolicy, Scenario, ScenarioContext

MARGIN = 60.0
BISECTION_STEPS = 7
#: How a late retry is retried while told "in progress": briskly.  Nothing of the key runs
#: then (its request finished long ago on the target's clock), so an answer "in progress" is
#: the evidence itself, and a careful client's twenty seconds of retries add nothing to it.
LATE_RETRIES = RetryPolicy(max_attempts=3, base_delay=0.05, max_delay=0.2, deadline=2.0)
#: Copies of an expired key released at once: at most one may execute.
EXPIRED_COPIES = 4
#: Bursts of such copies, each with a fresh key, until the answers show two copies met.
EXPIRED_BURSTS = 3
#: How much longer each copy's work is made (by the slow hook, where the target has one), so
#: the copies are still arriving while the first runs, on a loaded machine too.
EXPIRED_SLOW_MS = 200


def _probe(ctx: ScenarioContext, age: float, label: str) -> bool:
    """Charge with a fresh key, let ``age`` seconds pass on the target's clock, retry: was the
    retry answered from the stored response?"""
    request = ctx.request(ctx.new_key(), label="original")
    first = ctx.retry_until_answer(request, first_attempt=1)[-1]
    ctx.advance_clock(age)
    retry = ctx.retry_until_answer(replace(request, label=label),
                                   first_attempt=first.attempt + 1 if first.attempt else 2,
                                   policy=LATE_RETRIES)[-1]
    return retry.resource is not None and retry.resource == first.resource


def _expired_burst(ctx: ScenarioContext, age: float) -> bool:
    """Charge, let the key expire, then release copies of the same request at once: the key
    is new again, and exactly one of them may execute (the claim of an expired key must be as
    atomic as a fresh one's).  Did two copies meet, by their answers?"""
    request = ctx.request(ctx.new_key(), label="original")
    first = ctx.retry_until_answer(request, first_attempt=1)[-1]
    ctx.advance_clock(age)
    attempt = (first.attempt or 1) + 1
    copy = replace(request, label="expired-burst")
    slowed = ctx.target.hooks.slow is not None
    if ctx.target.promises.in_progress == "conflict":  # their answers can show that they met
        ctx.intend(COPIES_MET, copy, ("P1",), group="expired-burst", label=copy.label,
                   slowed=slowed)
    if slowed:
        copy = ctx.slowed(copy, EXPIRED_SLOW_MS)
    answers = ctx.concurrently([copy] * EXPIRED_COPIES, attempt=attempt)
    for position, answer in enumerate(answers):
        if not ctx.is_final(answer):  # told in progress while a copy runs: retry as usual
            ctx.retry_until_answer(replace(request, label="retry"), process=f"c{position}",
                                   first_attempt=attempt + 1)
    return ctx.copies_met(answers)


def run(ctx: ScenarioContext) -> None:
    promised = ctx.target.promises.retention
    assert promised is not None  # guaranteed by needs
    _probe(ctx, promised - MARGIN, "retention-probe:inside")
    _probe(ctx, promised + MARGIN, "retention-probe:outside")
    for _ in range(EXPIRED_BURSTS):
        if _expired_burst(ctx, promised + MARGIN):
            break
    low, high = 0.0, max(2 * promised, promised + 2 * MARGIN)
    for _ in range(BISECTION_STEPS):
        middle = (low + high) / 2
        if _probe(ctx, middle, "retention-probe:bisect"):
            low = middle
        else:
            high = middle


SCENARIO = Scenario(
    name="late-retry",
    summary="retries just inside and just past the retention window; effective retention "
            "measured by bisection",
    story=(
        "Some clients retry very late: a phone that was offline overnight, a batch job re-run "
        "the next morning. The server remembers keys only for its retention window. Inside it "
        "the retry must be answered from the stored response; past it the key is forgotten and "
        "the request is new, which is the contract, not a duplicate. The trouble starts when "
        "the real window is shorter than the promised one, or shorter than how late clients "
        "retry: then a late retry charges the card again. And an expired key is a fresh key: a "
        "burst of late retries of it must still make only one new charge."
    ),
    properties=("P1", "P3", "P6"),
    plan=(
        "charge with a fresh key, advance the target's clock to one minute before the promised "
        "retention, retry: expect the replay",
        "charge with another key, advance to one minute past it, retry: a new charge is allowed",
        f"charge with a third key, advance past the retention, release {EXPIRED_COPIES} copies "
        f"of it at once, each slowed {EXPIRED_SLOW_MS} ms by the slow hook when the target has "
        "one (those told 'in progress' retry until answered): at most one new charge; until "
        f"the answers show two copies met (one told 'in progress', or two charges), up to "
        f"{EXPIRED_BURSTS} bursts, each with a fresh key; if none did, P1 is unknown where the "
        "copies were slowed, and a note says so where the target has no slow hook",
        f"bisect ({BISECTION_STEPS} probes, each with a fresh key) between 0 and twice the "
        "promise for the age at which keys are forgotten",
        "check: replays inside the promise; the measured retention against the promise and the "
        "client's retry horizon",
    ),
    run=run,
    needs=frozenset({"clock", "retention"}),
)

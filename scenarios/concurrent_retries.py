"""A retry storm: many copies of one request, released at the same instant or spread over the
time one request takes, so the copies meet the original while it still runs."""

from __future__ import annotations

from dataclasses import replace

from harness import Event, Request, Scenario, ScenarioContext

COPIES = 8


def _burst(ctx: ScenarioContext, label: str, instances: tuple[int, ...],
           stagger: float = 0.0) -> None:
    request = ctx.request(ctx.new_key(), label=label)
    answers = ctx.concurrently([request] * COPIES, instances=instances, stagger=stagger)
    _settle(ctx, request, answers)


def _settle(ctx: ScenarioContext, request: Request, answers: list[Event]) -> None:
    """Clients that were told "in progress" come back until they get the final answer."""
    for position, answer in enumerate(answers):
        if not ctx.is_final(answer):
            ctx.retry_until_answer(replace(request, label="retry"), process=f"c{position}",
                                   instance=int(answer.value.get("instance", 0)))


def run(ctx: ScenarioContext) -> None:
    _burst(ctx, "burst", (0,))
    latency = ctx.measure_latency()
    _burst(ctx, "burst:staggered", (0,), stagger=latency / COPIES)
    with ctx.fault("request-latency"):
        _burst(ctx, "burst:latency", (0,))
    if ctx.ensure_instances(2) >= 2:
        _burst(ctx, "burst:two-processes", (0, 1))


SCENARIO = Scenario(
    name="concurrent-retries",
    summary=f"{COPIES} copies of one request released together: one charge, the rest 409 or "
            "replays",
    story=(
        "A mobile client on a bad network fires the same charge again and again; a load "
        "balancer retries it on another server; a queue redelivers it. The copies arrive at the "
        "same instant, or one after another while the first is still being handled. If the "
        "server checks for the key and then inserts it as two separate steps, several copies "
        "pass the check before any of them inserts, and each one charges the card. A correct "
        "server claims the key atomically: exactly one copy runs, the others are told it is in "
        "progress (409) or get the stored response."
    ),
    properties=("P1", "P2", "P3", "P5"),
    plan=(
        f"release {COPIES} identical requests with one fresh key at once (a barrier)",
        "measure how long an ordinary request takes (the median of a few, each with a fresh "
        f"key); release {COPIES} copies of a new request spread evenly over that time, so "
        "they arrive while the first still runs",
        "again at once, with 300 ms ± 100 ms of upstream latency on every connection",
        "again, spread over two target processes, only when the target file says its "
        "processes share one store (start.shared_state); otherwise one process is the service",
        "every copy that was told 'in progress' retries until it gets the final answer",
        "check: one charge per key; every success names it; the others got 409 or the replay",
    ),
    run=run,
    uses=frozenset({"instances"}),
)

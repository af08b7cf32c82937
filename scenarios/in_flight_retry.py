"""A retry that arrives while the original is still being handled."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext

SLOW_MS = 1500


def run(ctx: ScenarioContext) -> None:
    request = ctx.request(ctx.new_key(), label="original")
    original = ctx.send_slowly(request, slow_ms=SLOW_MS)
    ctx.send(replace(request, label="in-flight-retry"), process="c1", attempt=2)
    original.wait()
    ctx.retry_until_answer(replace(request, label="retry"), process="c1", first_attempt=3)


SCENARIO = Scenario(
    name="in-flight-retry",
    summary="a retry while the original is still running: 409 with Retry-After, or a wait and "
            "the replay",
    story=(
        "The payment provider is slow today. The client's own timeout is shorter than the "
        "provider's latency, so it retries while the first request is still being processed. "
        "The key is claimed but has no stored response yet. The server must not run the charge "
        "a second time: it answers 409 with a hint to retry shortly, or, if it promises to, "
        "waits for the original to finish and replays its response."
    ),
    properties=("P1", "P3", "P5"),
    plan=(
        f"send a charge whose handler is slowed by {SLOW_MS} ms (the slow hook)",
        "once the target reports the key in progress, retry with the same key and body",
        "after the original finishes, retry until a final answer",
        "check: the in-flight retry got 409 (with Retry-After when promised) or the replay; one "
        "charge",
    ),
    run=run,
    needs=frozenset({"slow"}),
)

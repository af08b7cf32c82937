"""The seed's opening story: the charge commits, the response is lost, the client retries."""

from __future__ import annotations

from dataclasses import replace

from harness import Scenario, ScenarioContext

LOST_RESPONSES = ("response-timeout", "response-reset", "response-cut")


def run(ctx: ScenarioContext) -> None:
    for fault in LOST_RESPONSES:
        request = ctx.request(ctx.new_key(), label="original")
        ctx.send_through(fault, request)
        ctx.retry_until_answer(replace(request, label="retry"))


SCENARIO = Scenario(
    name="timeout-after-commit",
    summary="the charge commits, the response is lost, the client retries with the same key",
    story=(
        "A client POSTs a charge. The request reaches the server, the database commits, and the "
        "response is on its way back when the network loses it: a timeout, a reset, a "
        "connection cut halfway through the body. The client cannot know the card was charged, "
        "so it does the only safe thing and retries with the same idempotency key. A correct "
        "server recognises the key and answers with the response it stored: one charge, and the "
        "client finally learns its outcome. A server without a working idempotency layer charges "
        "the card a second time."
    ),
    properties=("P1", "P2", "P3"),
    plan=(
        "for each of: response held back until the client times out (downstream timeout), "
        "connection reset as the response starts (downstream reset_peer), response cut after "
        "64 bytes (downstream limit_data):",
        "  send a charge with a fresh key through the fault; the client gets no answer",
        "  heal the fault and retry with the same key and body until a final answer",
        "check: exactly one charge per key, the retry replays the original response",
    ),
    run=run,
)

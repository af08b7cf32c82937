"""The scenario context's timing, leases, processes and keyless counting, against a fake
service: what would have produced false findings on a correct third-party target."""

from __future__ import annotations

import time

import httpx

from harness import RetryPolicy, Scenario
from scenarios import CATALOG, concurrent_retries, handler_error, in_flight_retry, missing_key
from tests.scenarios.fakes import FakeService, completion, context, invokes, target

KEYLESS_TOTAL = {"effects": {"kind": "http", "url": "/effects", "query": {"key": "{key}"},
                             "keyless": {"how": "total", "url": "/effects/total"}}}
STARTED = {"start": {"command": ["serve", "--port", "{port}"]}}


def test_in_flight_retry_needs_no_slow_hook_and_meets_the_running_original() -> None:
    fake = target()
    assert CATALOG["in-flight-retry"].not_applicable(fake) is None
    ctx, _ = context(fake, FakeService(latency=0.2))
    in_flight_retry.run(ctx)
    sent = invokes(ctx)
    assert sum(e.label == "latency-probe" for e in sent) == 5
    originals = [e for e in sent if e.label == "original"]
    retries = [e for e in sent if e.label == "in-flight-retry"]
    assert len(originals) == len(retries) == 3
    for original, retry in zip(originals, retries, strict=True):
        assert retry.key == original.key
        assert original.time < retry.time < completion(ctx, original).time
        assert completion(ctx, retry).status == 409


def test_a_lease_within_a_minute_is_outwaited_in_real_time() -> None:
    lease = 4.0
    claimed_at = time.monotonic()

    def stuck_until_the_lease(request: httpx.Request, service: FakeService) -> httpx.Response:
        if time.monotonic() < claimed_at + lease:
            return httpx.Response(409, json={"error": "in progress"})
        return httpx.Response(201, json={"id": "ch_1"})

    ctx, _ = context(target(promises={"lease": "4s"}),
                     FakeService(respond=stuck_until_the_lease))
    answers = ctx.converge(ctx.request(ctx.new_key(), label="retry"))
    assert answers[-1].status == 201
    assert any(a.status == 201 for a in answers)
    assert time.monotonic() - claimed_at >= lease
    assert not [e for e in ctx.history.events() if e.f == "lease-not-waited"]


def always_in_progress(request: httpx.Request, service: FakeService) -> httpx.Response:
    return httpx.Response(409, json={"error": "in progress"})


def test_a_lease_longer_than_a_minute_without_a_clock_is_recorded_as_not_waited() -> None:
    ctx, _ = context(target(promises={"lease": "5m"}), FakeService(respond=always_in_progress))
    ctx.policy = RetryPolicy(max_attempts=2, base_delay=0.01)
    request = ctx.request(ctx.new_key(), label="retry")
    ctx.converge(request)
    [note] = [e for e in ctx.history.events() if e.f == "lease-not-waited"]
    assert note.type == "info" and note.key == request.key
    assert note.value["lease"] == 300.0 and "clock" in note.value["reason"]


def test_with_a_clock_hook_the_lease_runs_out_on_the_targets_clock() -> None:
    ctx, deployment = context(target(promises={"lease": "5m"},
                                     hooks={"clock": {"path": "/clock"}}),
                              FakeService(respond=always_in_progress))
    ctx.policy = RetryPolicy(max_attempts=2, base_delay=0.01)
    ctx.converge(ctx.request(ctx.new_key(), label="retry"))
    assert deployment.clock == [301.0]


def test_the_retry_policy_stretches_over_a_lease() -> None:
    policy = RetryPolicy().covering(45.0)
    assert policy.deadline >= 45.0
    assert sum(min(policy.max_delay, policy.base_delay * 2.0 ** n) / 2
               for n in range(policy.max_attempts)) >= 45.0


def test_a_second_process_only_when_the_processes_share_state() -> None:
    alone, deployment = context(target(**STARTED))
    assert alone.ensure_instances(2) == 1 and 2 not in deployment.ensured
    concurrent_retries.run(alone)
    assert all("instance" not in e.value for e in invokes(alone))
    shared, deployment = context(target(start={**STARTED["start"], "shared_state": True}))
    assert shared.ensure_instances(2) == 2 and deployment.ensured == [2]


def test_keyless_requests_counted_as_a_total_go_alone_between_two_totals() -> None:
    ctx, _ = context(target(promises={"mode": "lax"}, **KEYLESS_TOTAL))
    missing_key.run(ctx)
    steps = [(e.f, e.type) for e in ctx.history.events()
             if e.f == "effects-total" or (e.f == "request" and e.key is None)]
    one = [("effects-total", "ok"), ("request", "invoke"), ("request", "fail"),
           ("effects-total", "ok")]
    assert steps == one * missing_key.KEYLESS_REQUESTS


def test_keyless_requests_without_any_count_are_just_sent() -> None:
    ctx, _ = context(target())
    missing_key.run(ctx)
    assert not [e for e in ctx.history.events() if e.f == "effects-total"]
    assert sum(e.key is None for e in invokes(ctx)) == missing_key.KEYLESS_REQUESTS


def test_handler_error_tries_every_declared_fault_and_retries_without_it() -> None:
    faults = [{"name": "before", "header": "X-Fault", "value": "raise-before"},
              {"name": "after", "header": "X-Fault", "value": "raise-after",
               "when": "after-work"}]

    def failing(request: httpx.Request, service: FakeService) -> httpx.Response | None:
        return httpx.Response(500) if "x-fault" in request.headers else None

    ctx, _ = context(target(hooks={"handler_errors": faults}), FakeService(respond=failing))
    handler_error.run(ctx)
    sent = invokes(ctx)
    for name in ("before", "after"):  # 500 with the fault's header, 201 without it
        [faulted] = [e for e in sent if e.label == f"handler:{name}"]
        retries = [e for e in sent if e.key == faulted.key and e.label == "retry"]
        assert retries and completion(ctx, retries[-1]).status == 201
        assert completion(ctx, faulted).status == 500
    assert len(sent) == 4


def test_a_process_that_exited_by_itself_is_recorded_before_it_is_started_again() -> None:
    scenario = Scenario("exits", "", "", (), (), run=lambda ctx: None)
    ctx, deployment = context(target(**STARTED), scenario=scenario)
    deployment.exits = [(0, 3)]
    ctx.send(ctx.request(ctx.new_key(), label="control"))
    first, second = ctx.history.events()[:2]
    assert (first.f, first.type, first.process) == ("exit", "info", "nemesis")
    assert first.value == {"instance": 0, "code": 3, "scenario": "exits"}
    assert second.f == "request" and deployment.started_again == [0]

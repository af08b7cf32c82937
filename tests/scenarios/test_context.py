"""The scenario context's timing, leases, processes and keyless counting, against a real
service (``tests.scenarios.service``) behind Toxiproxy: what would have produced false
findings on a correct third-party target."""

from __future__ import annotations

import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import httpx

from harness import RetryPolicy, Scenario
from harness.services._toxiproxy import ToxiproxyServer
from scenarios import CATALOG, concurrent_retries, handler_error, in_flight_retry, missing_key
from tests.scenarios.deployed import (
    completion,
    deployed,
    get,
    invokes,
    target,
    wait_until_ended,
)

KEYLESS_TOTAL: dict[str, Any] = {
    "effects": {"kind": "http", "url": "/effects", "query": {"key": "{key}"},
                "keyless": {"how": "total", "url": "/effects/total"}}}
ALWAYS_IN_PROGRESS = ("--in-progress-for", "1e9")


def test_in_flight_retry_needs_no_slow_hook_and_meets_the_running_original(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    assert CATALOG["in-flight-retry"].not_applicable(target()) is None
    with deployed(toxiproxy_server, tmp_path, "--latency", "0.2") as (ctx, _):
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


def test_a_lease_within_a_minute_is_outwaited_in_real_time(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    lease = 4.0
    with deployed(toxiproxy_server, tmp_path, "--in-progress-for", str(lease),
                  promises={"lease": "4s"}) as (ctx, _):
        claimed_at = time.monotonic()  # before the first request: the service's claim is later
        answers = ctx.converge(ctx.request(ctx.new_key(), label="retry"))
    assert answers[-1].status == 201
    assert any(a.status == 201 for a in answers)
    assert time.monotonic() - claimed_at >= lease
    assert not [e for e in ctx.history.events() if e.f == "lease-not-waited"]


def test_a_lease_longer_than_a_minute_without_a_clock_is_recorded_as_not_waited(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path, *ALWAYS_IN_PROGRESS,
                  promises={"lease": "5m"}) as (ctx, _):
        ctx.policy = RetryPolicy(max_attempts=2, base_delay=0.01)
        request = ctx.request(ctx.new_key(), label="retry")
        ctx.converge(request)
    [note] = [e for e in ctx.history.events() if e.f == "lease-not-waited"]
    assert note.type == "info" and note.key == request.key
    assert note.value["lease"] == 300.0 and "clock" in note.value["reason"]


def test_with_a_clock_hook_the_lease_runs_out_on_the_targets_clock(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path, *ALWAYS_IN_PROGRESS, promises={"lease": "5m"},
                  hooks={"clock": {"path": "/clock"}}) as (ctx, deployment):
        ctx.policy = RetryPolicy(max_attempts=2, base_delay=0.01)
        ctx.converge(ctx.request(ctx.new_key(), label="retry"))
        assert get(deployment, "/clock") == {"advanced": 301.0}


def test_the_retry_policy_stretches_over_a_lease() -> None:
    policy = RetryPolicy().covering(45.0)
    assert policy.deadline >= 45.0
    assert sum(min(policy.max_delay, policy.base_delay * 2.0 ** n) / 2
               for n in range(policy.max_attempts)) >= 45.0


def test_a_second_process_only_when_the_processes_share_state(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path / "alone") as (alone, deployment):
        assert alone.ensure_instances(2) == 1 and len(deployment.instances) == 1
        concurrent_retries.run(alone)
        assert len(deployment.instances) == 1
    assert all("instance" not in e.value for e in invokes(alone))
    with deployed(toxiproxy_server, tmp_path / "shared",
                  start={"shared_state": True}) as (shared, deployment):
        assert shared.ensure_instances(2) == 2 and len(deployment.instances) == 2
        assert all(i.process is not None and i.process.running() for i in deployment.instances)


def test_keyless_requests_counted_as_a_total_go_alone_between_two_totals(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path, promises={"mode": "lax"},
                  **KEYLESS_TOTAL) as (ctx, _):
        missing_key.run(ctx)
    steps = [(e.f, e.type) for e in ctx.history.events()
             if e.f == "effects-total" or (e.f == "request" and e.key is None)]
    one = [("effects-total", "ok"), ("request", "invoke"), ("request", "fail"),
           ("effects-total", "ok")]
    assert steps == one * missing_key.KEYLESS_REQUESTS


def test_keyless_requests_without_any_count_are_just_sent(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with deployed(toxiproxy_server, tmp_path) as (ctx, _):
        missing_key.run(ctx)
    assert not [e for e in ctx.history.events() if e.f == "effects-total"]
    assert sum(e.key is None for e in invokes(ctx)) == missing_key.KEYLESS_REQUESTS


def test_handler_error_tries_every_declared_fault_and_retries_without_it(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    faults = [{"name": "before", "header": "X-Fault", "value": "raise-before"},
              {"name": "after", "header": "X-Fault", "value": "raise-after",
               "when": "after-work"}]
    with deployed(toxiproxy_server, tmp_path, "--fault-header", "X-Fault",
                  hooks={"handler_errors": faults}) as (ctx, _):
        handler_error.run(ctx)
    sent = invokes(ctx)
    for name in ("before", "after"):  # 500 with the fault's header, 201 without it
        [faulted] = [e for e in sent if e.label == f"handler:{name}"]
        retries = [e for e in sent if e.key == faulted.key and e.label == "retry"]
        assert retries and completion(ctx, retries[-1]).status == 201
        assert completion(ctx, faulted).status == 500
    assert len(sent) == 4


def test_a_process_that_exited_by_itself_is_recorded_before_it_is_started_again(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    scenario = Scenario("exits", "", "", (), (), run=lambda ctx: None)
    with deployed(toxiproxy_server, tmp_path, "--exit-on-header", "X-Exit",
                  scenario=scenario) as (ctx, deployment):
        first_process = deployment.instances[0].process
        assert first_process is not None
        pid = first_process.pid
        # Straight to the process and unrecorded: to the context it just ends by itself.
        with suppress(httpx.TransportError):  # it dies before answering, as asked
            httpx.post(deployment.instances[0].direct_url + "/charges", json={},
                       headers={"X-Exit": "1"}, timeout=10)
        wait_until_ended(deployment)
        ctx.send(ctx.request(ctx.new_key(), label="control"))
        first, restart, second = ctx.history.events()[:3]
        assert (first.f, first.type, first.process) == ("exit", "info", "nemesis")
        assert first.value == {"instance": 0, "code": 3, "scenario": "exits"}
        assert (restart.f, restart.value["instance"]) == ("restart", 0)
        assert second.f == "request" and second.label == "control"
        assert completion(ctx, second).status == 201
        assert deployment.is_running(0) and first_process.pid not in (None, pid)


def test_once_the_oracle_fails_slowly_the_keys_left_in_the_look_are_not_asked(
        toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """An admin endpoint that reads a store the story took down answers after its own timeout:
    a PostgreSQL exploration spent 650 of its 800 s asking it key after key, two seconds each.
    After one slow failure the rest of the look is recorded as not counted, as its failures
    would have been; a failure that comes at once (one key refused) does not stop the look."""
    with deployed(toxiproxy_server, tmp_path, "--effects-out", "1.2") as (ctx, _):
        keys = [("a", ctx.new_key()) for _ in range(3)]
        ctx.collect_effects(keys)
    slow = [e for e in ctx.history.events() if e.f == "effects"]
    assert [e.type for e in slow] == ["fail"] * 3
    assert "503" in (slow[0].error or "")
    for event in slow[1:]:
        assert (event.error or "").startswith("not asked: the oracle failed after 1."), event
    with deployed(toxiproxy_server, tmp_path / "fast", "--effects-out", "0") as (ctx, _):
        ctx.collect_effects([("a", ctx.new_key()) for _ in range(3)])
    fast = [e for e in ctx.history.events() if e.f == "effects"]
    assert [e.type for e in fast] == ["fail"] * 3
    assert all("503" in (e.error or "") for e in fast)

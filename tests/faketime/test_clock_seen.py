"""A jump made from outside is seen by the target, by the Redis its start command started, and
leaves the monotonic clock alone: event loops and their timers keep running after it.

Each test starts real processes (a deployment behind the session's Toxiproxy, or a Python
interpreter under the same environment) and waits on what they answer, never on sleeps alone;
every wait is bounded."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from email.utils import parsedate_to_datetime
from pathlib import Path

import httpx

from harness._clock import CONFIRMING_JUMP
from harness._target import Target
from harness.http._deployment import Deployment
from harness.services._faketime import FaketimeClock
from harness.services._toxiproxy import ToxiproxyServer
from tests.faketime.services.redis_charges import Redis

DAY = 86400.0


def charge(client: httpx.Client, url: str, key: str) -> httpx.Response:
    return client.post(f"{url}/charges", json={"amount": 100, "currency": "usd"},
                       headers={"Idempotency-Key": key, "Authorization": "Bearer t1"})


def target_offset(response: httpx.Response) -> float:
    """How far ahead of ours the clock the target's Date header shows is, in seconds."""
    return parsedate_to_datetime(response.headers["date"]).timestamp() - time.time()


def test_the_jump_is_seen_by_the_target_and_by_the_redis_it_started(
        python_target: Target, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    with Deployment(python_target, toxiproxy=toxiproxy_server, workdir=tmp_path) as deployment, \
            httpx.Client(timeout=10) as client:
        assert deployment.missing == {} and deployment.clock is not None
        url = deployment.instances[0].direct_url
        redis = Redis(int((tmp_path / "redis-port").read_text()))
        first = charge(client, url, "k1")
        assert first.status_code == 201
        assert abs(target_offset(first) - CONFIRMING_JUMP) < 5  # the confirming jump, seen
        assert redis("TTL", "idem:t1:k1") > DAY - 60

        deployment.advance_clock(DAY - 600)
        replay = charge(client, url, "k1")
        assert replay.headers["idempotent-replayed"] == "true"
        assert replay.json() == first.json()
        assert abs(target_offset(replay) - CONFIRMING_JUMP - DAY + 600) < 5
        assert 0 < redis("TTL", "idem:t1:k1") <= 601  # Redis counts down on the moved clock

        deployment.advance_clock(601)
        assert redis("EXISTS", "idem:t1:k1") == 0  # its TTL ran out in Redis itself
        again = charge(client, url, "k1")
        assert again.status_code == 201 and again.json()["id"] != first.json()["id"]


def test_node_timers_keep_running_after_a_jump(
        node_target: Target, toxiproxy_server: ToxiproxyServer, tmp_path: Path) -> None:
    """The sweeper is a setInterval on Node's (monotonic) timers: it removes the expired keys by
    itself after a day's jump, and a handler waiting on setTimeout still answers."""
    with Deployment(node_target, toxiproxy=toxiproxy_server, workdir=tmp_path) as deployment, \
            httpx.Client(timeout=10) as client:
        url = deployment.instances[0].direct_url
        for key in ("k1", "k2"):
            assert charge(client, url, key).status_code == 201
        assert client.get(f"{url}/keys").json() == {"rows": 2, "held": 2}

        deployment.advance_clock(DAY + 1)
        assert client.get(f"{url}/keys").json()["rows"] == 0  # expired on Date.now() at once
        deadline = time.monotonic() + 5
        while client.get(f"{url}/keys").json()["held"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert client.get(f"{url}/keys").json()["held"] == 0  # the sweeper's timer ran

        started = time.monotonic()
        slow = client.post(f"{url}/charges", json={"amount": 5, "currency": "usd"},
                           headers={"Idempotency-Key": "k3", "Authorization": "Bearer t1",
                                    "X-Test-Delay-Ms": "300"})
        assert slow.status_code == 201
        assert 0.25 < time.monotonic() - started < 5  # setTimeout waited its 300 ms, no more


TICKER = """
import asyncio, json, sys, time

async def main():
    loop = asyncio.get_running_loop()
    for tick in range(200):
        await asyncio.sleep(0.05)
        fired = loop.time()
        loop.call_later(0.01, lambda: None)  # a timer scheduled after the jump
        print(json.dumps({"tick": tick, "wall": time.time(), "loop": fired}), flush=True)

asyncio.run(main())
"""


def test_an_asyncio_event_loop_keeps_its_timers_through_a_jump(faketime_ready: None,
                                                               tmp_path: Path) -> None:
    clock = FaketimeClock(tmp_path)
    process = subprocess.Popen([sys.executable, "-c", TICKER], stdout=subprocess.PIPE,
                               text=True, env=clock.environment(dict(os.environ)))
    output = process.stdout
    assert output is not None
    try:
        def next_tick() -> dict[str, float]:
            ready, _, _ = select.select([output], [], [], 5)
            assert ready, "the event loop stopped ticking"
            tick: dict[str, float] = json.loads(output.readline())
            return tick

        before = next_tick()
        assert abs(before["wall"] - time.time()) < 5
        clock.advance(DAY)
        # The ticks printed while the jump settled are still in the pipe: read past them to the
        # first one after the jump (at most 100 ticks, 5 s).
        after = next_tick()
        for _ in range(100):
            if after["wall"] - time.time() > DAY - 5:  # time.time() jumped a day
                break
            after = next_tick()
        assert after["wall"] - time.time() > DAY - 5, "no tick saw the jump"
        assert after["loop"] - before["loop"] < 10  # the loop's own clock did not
    finally:
        process.kill()
        process.wait(timeout=10)

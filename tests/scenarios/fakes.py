"""A scenario context wired to an in-process fake service instead of a deployment: what a
scenario sends (paths, keys, labels, times) is read from the history it records, in
milliseconds and without starting anything.  The fake is a small correct idempotency layer
(claim, replay, mismatch, missing key); a test changes one behaviour through ``respond``."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from harness import Event, History, Scenario, ScenarioContext
from harness._client import fingerprint
from harness._oracle import EffectCount
from harness._target import Target, parse_target

URL = "http://127.0.0.1:9"  # never dialled by httpx (a mock transport answers); refused fast


def target(**overrides: Any) -> Target:
    """A target file for a running service, with ``overrides`` merged into its tables."""
    data: dict[str, Any] = {
        "name": "fake",
        "url": URL,
        "effects": {"kind": "http", "url": "/effects", "query": {"key": "{key}"}},
    }
    for name, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(name), dict):
            data[name] = {**data[name], **value}
        else:
            data[name] = value
    if "start" in data:
        data.pop("url")
    return parse_target(data, source="fake.toml")


class Proxy:
    """Toxiproxy's proxy, doing nothing: the fake service has no network to fault."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


@dataclass
class Instance:
    number: int
    url: str = URL
    direct_url: str = URL
    process: None = None
    proxy: Proxy = field(default_factory=Proxy)


class FakeOracle:
    def __init__(self, service: FakeService) -> None:
        self.service = service

    def count(self, tenant: str | None, key: str | None) -> EffectCount:
        return EffectCount(sum(1 for k in self.service.charges if k == key), None)

    def total(self) -> int:
        return len(self.service.charges)

    def close(self) -> None:
        pass


class FakeDeployment:
    """What ``ScenarioContext`` asks of a deployment, recorded instead of done."""

    def __init__(self, target: Target, service: FakeService) -> None:
        self.target = target
        self.run_id = "fake"
        self.instances = [Instance(0)]
        self.oracle = FakeOracle(service)
        self.ensured: list[int] = []
        self.clock: list[float] = []
        self.exits: list[tuple[int, int]] = []
        self.started_again: list[int] = []

    def ensure_instances(self, count: int) -> None:
        self.ensured.append(count)
        while len(self.instances) < count:
            self.instances.append(Instance(len(self.instances)))

    def advance_clock(self, seconds: float) -> None:
        self.clock.append(seconds)

    def store_size(self) -> dict[str, int]:
        return {"rows": 0}

    def exited_by_themselves(self) -> list[tuple[int, int]]:
        exited, self.exits = self.exits, []
        return exited

    def start_again(self, number: int) -> None:
        self.started_again.append(number)


Respond = Callable[[httpx.Request, "FakeService"], httpx.Response | None]


@dataclass
class FakeService:
    """A correct idempotency layer in memory; ``respond`` may answer first (None: go on)."""

    key_header: str = "idempotency-key"
    latency: float = 0.0
    respond: Respond | None = None
    charges: list[str | None] = field(default_factory=list)
    stored: dict[str, tuple[str, httpx.Response | None]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if self.respond is not None:
            answer = self.respond(request, self)
            if answer is not None:
                return answer
        key = request.headers.get(self.key_header)
        if key is None:
            return httpx.Response(400, json={"error": "missing key"})
        mark = fingerprint(request.method, str(request.url.raw_path.decode()), request.content)
        with self.lock:
            if key in self.stored:
                seen, answer = self.stored[key]
                if seen != mark:
                    return httpx.Response(422, json={"error": "reuse"})
                return answer or httpx.Response(409, json={"error": "in progress"})
            self.stored[key] = (mark, None)
        time.sleep(self.latency)
        with self.lock:
            self.charges.append(key)
            answer = httpx.Response(201, json={"id": f"ch_{len(self.charges)}"})
            self.stored[key] = (mark, answer)
        return answer


def context(target: Target, service: FakeService | None = None, *,
            scenario: Scenario | None = None) -> tuple[ScenarioContext, FakeDeployment]:
    service = service or FakeService(key_header=target.key.header.lower())
    deployment = FakeDeployment(target, service)
    chosen = scenario or Scenario("fake", "", "", (), (), run=lambda ctx: None)
    ctx = ScenarioContext(scenario=chosen, deployment=deployment,  # type: ignore[arg-type]
                          history=History(), rng=random.Random(1))
    ctx.client._http = httpx.Client(transport=httpx.MockTransport(service.handle))
    return ctx, deployment


def invokes(ctx: ScenarioContext) -> list[Event]:
    return [e for e in ctx.history.events() if e.f == "request" and e.type == "invoke"]


def completion(ctx: ScenarioContext, invoke: Event) -> Event:
    return next(e for e in ctx.history.events()
                if e.op == invoke.op and e.f == "request" and e.type != "invoke")


def sent_body(invoke: Event) -> Any:
    return json.loads(invoke.body or "null")

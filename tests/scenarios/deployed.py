"""A scenario context over a real deployment of ``tests.scenarios.service``: the service runs
as its own process, started by the harness's ``Deployment`` behind the session's Toxiproxy,
and what a scenario sends (paths, keys, labels, times) is read from the history it records.
A test picks the service's behaviour with its command-line options (see its docstring) and
the target file's tables with ``target_overrides``."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from harness import Event, History, Scenario, ScenarioContext
from harness._target import Target
from harness.http._deployment import Deployment
from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._loader import parse_target

REPOSITORY = Path(__file__).resolve().parents[2]


def target(*service_options: str, **overrides: Any) -> Target:
    """A target file that starts the service with ``service_options``, with ``overrides``
    merged into its tables (a table into a table, anything else replaced)."""
    data: dict[str, Any] = {
        "name": "scenario-service",
        "start": {
            "command": ["{python}", "-m", "tests.scenarios.service", "--port", "{port}",
                        *service_options],
            "cwd": str(REPOSITORY),
            "ready_path": "/health",
        },
        "effects": {"kind": "http", "url": "/effects", "query": {"key": "{key}"}},
    }
    for name, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(name), dict):
            data[name] = {**data[name], **value}
        else:
            data[name] = value
    return parse_target(data, source=__file__)


@contextmanager
def deployed(toxiproxy: ToxiproxyServer, workdir: Path, *service_options: str,
             scenario: Scenario | None = None,
             **target_overrides: Any) -> Iterator[tuple[ScenarioContext, Deployment]]:
    """The service started with ``service_options`` behind Toxiproxy, and a context over it;
    everything is stopped on leaving."""
    chosen = scenario or Scenario("service", "", "", (), (), run=lambda ctx: None)
    with Deployment(target(*service_options, **target_overrides), toxiproxy=toxiproxy,
                    workdir=workdir) as deployment:
        ctx = ScenarioContext(scenario=chosen, deployment=deployment, history=History(),
                              rng=random.Random(1))
        try:
            yield ctx, deployment
        finally:
            ctx.client.close()


def get(deployment: Deployment, path: str) -> Any:
    """Ask the first process directly (not through the proxy) and return its JSON."""
    response = httpx.get(deployment.instances[0].direct_url + path, timeout=10)
    response.raise_for_status()
    return response.json()


def wait_until_ended(deployment: Deployment, number: int = 0, *, timeout: float = 10.0) -> None:
    """Return once instance ``number``'s process has ended by itself, or fail after
    ``timeout``.  It only polls (``Popen.poll`` keeps the return code), so the exit is left
    for ``exited_by_themselves`` to find and record, unlike ``Deployment.wait_for_exit``,
    which takes it as a crash the harness caused."""
    deadline = time.monotonic() + timeout
    while deployment.is_running(number):
        if time.monotonic() > deadline:
            raise AssertionError(f"instance {number} still runs after {timeout:g} s")
        time.sleep(0.01)


def invokes(ctx: ScenarioContext) -> list[Event]:
    return [e for e in ctx.history.events() if e.f == "request" and e.type == "invoke"]


def completion(ctx: ScenarioContext, invoke: Event) -> Event:
    return next(e for e in ctx.history.events()
                if e.op == invoke.op and e.f == "request" and e.type != "invoke")


def sent_body(invoke: Event) -> Any:
    return json.loads(invoke.body or "null")

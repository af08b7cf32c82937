"""``run_load``: deploy the target, run Locust against it under chaos, collect the evidence, judge.

Jepsen's shape again: the Locust processes (generators and clients) and the chaos thread
(nemesis) only act and record; once they are done the histories are merged, the oracle is asked
about every key, and the checker judges P1, P2, P4 and P5 over the whole history.  Everything
Locust runs lives in separate processes (see ``harness.http.load``); this module never imports it.
"""

from __future__ import annotations

import random
import shutil
import socket
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness._errors import ServiceError, UsageError
from harness._history import Event, History
from harness._interrupts import Interrupted, interruption_handled
from harness._outcomes import RunResult, ScenarioOutcome
from harness._runner import DEFAULT_RETRY_HORIZON, judge
from harness._target import Target
from harness.http._client import RetryPolicy
from harness.http._deployment import Deployment
from harness.http._nemesis import Nemesis
from harness.http.load._chaos import ChaosRunner
from harness.http.load._cpu import CpuMeter, CpuSplit
from harness.http.load._effects import collect_effects
from harness.http.load._exercise import not_exercised
from harness.http.load._figures import fault_windows, load_figures, timeline
from harness.http.load._launch import LocustProcesses
from harness.http.load._merge import merge_histories, read_wall_events, shift
from harness.http.load._plan import LoadPlan, events_file, target_definition
from harness.http.load._schedule import CHAOS_PROFILES, Window, chaos_schedule
from harness.judging._analysis import View
from harness.judging._checker import CheckResult
from harness.judging._findings import merge_verdicts
from harness.services._network import free_port, is_loopback, require_loopback
from harness.services._toxiproxy import ToxiproxyServer, start_toxiproxy

__all__ = ["LOAD_PROPERTIES", "LoadConfig", "LoadResult", "run_load"]

#: What the load sends decides what is judged: no key charged twice (P1), no key answered 2xx
#: without its one charge (P2), the reuses refused (P4) and the double submits and retries that
#: meet a running original answered as in flight (P5).  It makes no retention, tenant or bad
#: input probes, so the other properties would only judge side effects of the chaos.
LOAD_PROPERTIES = ("P1", "P2", "P4", "P5")
#: The shares of charges sent twice at once (a double click) and reused with another body.
DOUBLE_SUBMIT_SHARE = 0.125
REUSE_SHARE = 0.0625

SCENARIO = "load"
LOOPBACK = "127.0.0.1"
#: How long a master waits for its workers: its own start them at once; a person starts the
#: workers of other machines.
LOCAL_WORKER_WAIT = 60.0
REMOTE_WORKER_WAIT = 600.0


@dataclass(frozen=True)
class LoadConfig:
    """One load run.  ``schedule`` replaces the chaos profile's when given (tests use it)."""

    target: Target
    users: int
    spawn_rate: float
    duration: float
    report_dir: Path
    chaos: str = "none"
    servers: int = 1
    workers: int = 0
    seed: int | None = None
    request_timeout: float = 2.0
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    allow_remote: bool = False
    retry_horizon: float = DEFAULT_RETRY_HORIZON
    double_submit: float = DOUBLE_SUBMIT_SHARE
    reuse: float = REUSE_SHARE
    #: ``HOST:PORT`` where the master listens for ``workers`` started on other machines.
    listen: str | None = None
    schedule: Sequence[Window] | None = None
    toxiproxy: ToxiproxyServer | None = None

    def validate(self) -> None:
        problems = []
        if self.users < 1:
            problems.append("--users must be at least 1")
        if self.spawn_rate <= 0:
            problems.append("--spawn-rate must be more than 0 users per second")
        if self.duration <= 0:
            problems.append("--duration must be more than 0 (for example 60s)")
        if self.servers < 1:
            problems.append("--servers must be at least 1")
        if self.workers < 0:
            problems.append("--workers must be 0 (one process) or more")
        elif self.workers > self.users:
            problems.append(f"--workers {self.workers} would leave workers without users; "
                            f"give at most --users ({self.users}) workers")
        if self.request_timeout <= 0:
            problems.append("--request-timeout must be more than 0 (for example 2s)")
        if not (0 <= self.double_submit <= 1 and 0 <= self.reuse <= 1
                and self.double_submit + self.reuse <= 1):
            problems.append("the double-submit and reuse shares must be between 0 and 1, and "
                            "together at most 1")
        if self.listen is not None:
            host, _, port = self.listen.rpartition(":")
            if not host or not port.isdigit() or not 0 < int(port) < 65536:
                problems.append(f"--listen {self.listen!r}: write HOST:PORT, the address the "
                                "workers reach this machine at (for example 10.0.0.5:5557)")
            elif self.workers < 1:
                problems.append("--listen waits for workers of other machines: give their "
                                "number with --workers")
            else:
                require_loopback(host.strip("[]"), allow_remote=self.allow_remote)
        if self.chaos not in CHAOS_PROFILES:
            problems.append(f"unknown --chaos {self.chaos!r}; choose one of "
                            f"{', '.join(CHAOS_PROFILES)}")
        if problems:
            raise UsageError("; ".join(problems))


@dataclass(frozen=True)
class LoadResult:
    run: RunResult
    figures: dict[str, Any]
    timeline: list[dict[str, Any]]
    fault_windows: list[dict[str, Any]]
    cpu: CpuSplit
    schedule: tuple[Window, ...]
    settings: dict[str, Any]
    problems: tuple[str, ...] = ()
    #: What the run did not exercise (``_exercise``): each makes it inconclusive.
    not_exercised: tuple[str, ...] = ()

    @property
    def check(self) -> CheckResult | None:
        return self.run.outcomes[0].check

    @property
    def exit_code(self) -> int:
        return self.run.exit_code


def _silent(message: str) -> None:
    """The default progress sink: say nothing."""


def run_load(config: LoadConfig, *,
             progress: Callable[[str], None] = _silent) -> LoadResult:
    """Run the load described by ``config`` and return the judged result (files not written)."""
    config.validate()
    seed = config.seed if config.seed is not None else random.SystemRandom().randrange(2**32)
    schedule = tuple(config.schedule) if config.schedule is not None else tuple(chaos_schedule(
        config.chaos, duration=config.duration, instances=config.servers, seed=seed,
        request_timeout=config.request_timeout, can_restart=config.target.can_restart))
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    clock = time.monotonic()
    work_dir = config.report_dir / "work"
    target_dir = config.report_dir / "target"
    for stale in (work_dir, target_dir):  # the last run's plan, store and logs: start afresh
        shutil.rmtree(stale, ignore_errors=True)
    with ExitStack() as stack:
        toxiproxy = config.toxiproxy or stack.enter_context(start_toxiproxy(log_dir=work_dir))
        deployment = stack.enter_context(Deployment(
            config.target, toxiproxy=toxiproxy, workdir=target_dir,
            instances=config.servers, allow_remote=config.allow_remote))
        master = _master_address(config)
        plan = LoadPlan(
            run_id=deployment.run_id, seed=seed, users=config.users,
            spawn_rate=config.spawn_rate, duration=config.duration, workers=config.workers,
            urls=tuple(_worker_urls(config, master, deployment, stack)),
            target=target_definition(config.target), request_timeout=config.request_timeout,
            policy=config.policy, report_dir=str(config.report_dir), work_dir=str(work_dir),
            master_port=master[2] if config.workers else None,
            double_submit=config.double_submit, reuse=config.reuse, master_host=master[1],
            remote_workers=config.listen is not None,
            worker_wait=REMOTE_WORKER_WAIT if config.listen else LOCAL_WORKER_WAIT,
        )
        plan_path = work_dir / "plan.json"
        plan.write(plan_path)
        locusts = LocustProcesses(plan, plan_path)
        stack.callback(locusts.close)
        meter = CpuMeter(servers=lambda: _server_pids(deployment), toxiproxy=toxiproxy.pid)
        stack.callback(meter.close)

        def listening() -> None:
            if config.listen:
                progress(f"the Locust master listens on {master[1]}:{master[2]}; start "
                         f"{config.workers} worker(s) on the other machines, each with: "
                         f"idem-harness load --worker --master {master[0]}:{master[2]}"
                         + (" --allow-remote" if not is_loopback(master[0]) else "")
                         + f" (waiting up to {plan.worker_wait:.0f}s)")

        load_started = locusts.start(listening=listening)
        nemesis_history = History()
        nemesis_offset = time.time() - load_started
        nemesis_history.subscribe(
            lambda e: progress(f"{e.time + nemesis_offset:6.1f}s  {_describe(e)}"))
        chaos = ChaosRunner(Nemesis(deployment, nemesis_history), list(schedule),
                            duration=config.duration)
        stack.callback(chaos.stop)
        meter.start()
        chaos.start()
        progress(f"load started: {config.users} users, {config.servers} server(s), "
                 f"{config.workers or 'no'} worker(s), chaos {config.chaos}, seed {seed}")
        stopped_by = None
        try:
            nodes = locusts.wait(timeout=config.duration + plan.drain_timeout + 120.0)
        except Interrupted as stop:  # end it early, as its duration would, and say so
            interruption_handled()
            stopped_by = stop.signal_name
            progress(f"stopped by {stopped_by}: the users stop, their charges finish, the "
                     "report is written marked incomplete (Ctrl-C again abandons it)")
            chaos.stop()
            locusts.stop_early()
            nodes = locusts.wait(timeout=plan.drain_timeout + 120.0)
        chaos.join()
        cpu = meter.finish(locust=[float(n["cpu_seconds"]) for n in nodes["nodes"]]
                           + [float(nodes.get("stats_cpu_seconds", 0.0))])
        history = History(merge_histories([
            *_node_histories(nodes, work_dir, config.workers, origin=load_started),
            shift(nemesis_history.events(), nemesis_offset),
        ]))
        progress("load finished; asking the oracle about each key ...")
        asked = collect_effects(history, deployment)
        progress(f"judging {len(history)} events over {asked} keys ...")
        events = history.events()
        check = judge(events, config.target, config.retry_horizon,
                      base_url=deployment.instances[0].direct_url, properties=LOAD_PROPERTIES,
                      scripts=(config.report_dir, SCENARIO))
    problems = tuple(chaos.errors) + _node_problems(nodes)
    view = View(events)
    shortfalls = tuple(not_exercised(view, chaos=config.chaos, schedule=schedule,
                                     duration=config.duration))
    reasons = problems + tuple(f"not exercised: {s}" for s in shortfalls)
    if stopped_by is not None:
        reasons += (f"stopped early by {stopped_by}, {time.monotonic() - clock:.0f}s into a "
                    f"{config.duration:g}s load",)
    verdict = check.verdict if not reasons else merge_verdicts([check.verdict, "unknown"])
    outcome = ScenarioOutcome(SCENARIO, verdict, LOAD_PROPERTIES, check,
                              "; ".join(reasons) or None, events, time.monotonic() - clock)
    figures = load_figures(view, config.target.promises, check)
    settings = _settings(config, seed)
    run = RunResult(config.target, (outcome,), seed, started_at, config.report_dir,
                    config.retry_horizon, time.monotonic() - clock, stopped_by is None,
                    extra={"load": {**settings, "figures": figures}}, planned=(SCENARIO,),
                    stopped_by=stopped_by)
    return LoadResult(run, figures, timeline(view), fault_windows(view), cpu, schedule,
                      settings, problems, shortfalls)


def _master_address(config: LoadConfig) -> tuple[str, str, int]:
    """Where workers find the master (as given), the address it binds, and its port."""
    if config.listen is None:
        return LOOPBACK, LOOPBACK, free_port()
    host, _, port = config.listen.rpartition(":")
    host = host.strip("[]")
    require_loopback(host, allow_remote=config.allow_remote)
    try:
        bound = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0][4][0]
    except OSError as exc:
        raise UsageError(f"--listen {config.listen}: cannot resolve {host!r} ({exc}); give "
                         "this machine's address as the workers reach it") from exc
    return host, str(bound), int(port)


def _worker_urls(config: LoadConfig, master: tuple[str, str, int], deployment: Deployment,
                 stack: ExitStack) -> list[str]:
    """The URLs the Locust users send to: the instances' proxies, or, for workers on other
    machines, a second proxy per instance on the address they reach, in front of the first
    (the one the chaos faults), since the first listens on loopback only."""
    if config.listen is None:
        return [i.url for i in deployment.instances]
    host, bound, _ = master
    if is_loopback(bound):
        return [i.url for i in deployment.instances]
    listen = f"[{bound}]:0" if ":" in bound else f"{bound}:0"
    urls = []
    for instance in deployment.instances:
        relay = deployment.toxiproxy.client.create_proxy(
            f"idem-{deployment.run_id}-{instance.number}-remote", instance.proxy.listen,
            listen=listen)
        stack.callback(relay.delete)
        urls.append(f"http://{host}:{relay.port}")
    return urls


def _settings(config: LoadConfig, seed: int) -> dict[str, Any]:
    return {"users": config.users, "spawn_rate": config.spawn_rate,
            "duration": config.duration, "chaos": config.chaos, "servers": config.servers,
            "workers": config.workers, "request_timeout": config.request_timeout,
            "seed": seed, "double_submit": config.double_submit, "reuse": config.reuse,
            "listen": config.listen}


def _server_pids(deployment: Deployment) -> list[int]:
    return [pid for i in deployment.instances
            if i.process is not None and (pid := i.process.pid) is not None]


def _node_histories(nodes: dict[str, Any], work_dir: Path, workers: int, *,
                    origin: float) -> list[list[Event]]:
    """Every node's history; a node that sent none leaves keys nobody can judge: an error."""
    expected = [f"w{k}" for k in range(1, workers + 1)] if workers else ["local"]
    reported = {str(n["node"]) for n in nodes["nodes"]}
    missing = [name for name in expected if name not in reported]
    if missing:
        raise ServiceError(f"Locust node(s) {', '.join(missing)} sent no history; see the "
                           f"locust-*.log files in {work_dir}")
    return [read_wall_events(events_file(work_dir, name), origin=origin) for name in expected]


def _node_problems(nodes: dict[str, Any]) -> tuple[str, ...]:
    problems = []
    cut = sum(int(n["charges_cut"]) for n in nodes["nodes"])
    if cut:
        problems.append(f"{cut} charge(s) were still retrying when the run ended and were cut "
                        "off; their keys count as give-ups")
    errors = int(nodes.get("user_exceptions", 0))
    if errors:
        problems.append(f"{errors} exception(s) in the load's own code; see "
                        "locust_exceptions.csv")
    return tuple(problems)


def _describe(event: Event) -> str:
    value = event.value
    if event.f in ("fault", "heal"):
        return f"{event.f} {value.get('fault')}"
    return f"{event.f} server {value.get('instance', 0)}"

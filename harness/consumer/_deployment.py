"""A consumer target as a run sees it: the broker, and each consumer behind its own proxy.

The broker (an adapter behind the port of ``_broker.py``: RabbitMQ or Kafka, whichever the
target reads from), each consumer process behind its own link to it (a Toxiproxy proxy), the
effects oracle and the hooks.

The harness publishes and inspects on a direct connection; each consumer reaches the broker
through its proxy, so a fault meant for one consumer's connection never touches the harness's
evidence.  Processes are ``ManagedProcess``es like an HTTP target's: started, killed, restarted.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness._clock import CONFIRMING_JUMP, HookClock, TargetClock, confirm_jump, target_time
from harness._errors import ServiceError, ServiceUnavailable, UsageError
from harness._target import HttpEffects, RecorderEffects, SqlEffects, render_template
from harness.consumer._broker import BrokerLink, QueueState
from harness.consumer._brokers import BrokerService, open_broker
from harness.consumer._target import ConsumerTarget
from harness.evidence._oracle import EffectOracle, HttpOracle, RecorderOracle, SqlOracle
from harness.evidence._store_size import read_store_size, run_cleanup
from harness.services._faketime import FaketimeClock
from harness.services._network import free_port
from harness.services._processes import ManagedProcess
from harness.services._recorder import Recorder
from harness.services._toxiproxy import ToxiproxyProxy, ToxiproxyServer

__all__ = ["ConsumerDeployment", "ConsumerInstance"]

#: Seconds between two looks at the broker's consumer count while a consumer starts.
_READY_POLL = 0.05
#: Seconds a restart waits for the port of a killed consumer (and of the workers it forked) to
#: be free: a process group's last members may hold it a moment after the kill.
_PORT_FREE_WAIT = 10.0


@dataclass
class ConsumerInstance:
    """One consumer process and the link (a proxy of its own) through which it reaches the
    broker."""

    number: int
    link: BrokerLink
    process: ManagedProcess
    port: int | None
    #: With ``ready = "queue"`` (or ``"group"``): the loopback port the harness opens once the
    #: broker counts the consumer, its readiness signal; never ``port``, which the consumer may
    #: serve on.
    ready_port: int | None = None

    @property
    def name(self) -> str:
        return f"consumer-{self.number}"

    @property
    def proxy(self) -> ToxiproxyProxy:
        return self.link.proxy


class ConsumerDeployment:
    """Starts the consumers the target file describes and tears all of it down on ``close``.
    ``broker`` is where the run's broker is reached (``_brokers.broker_for``)."""

    def __init__(self, target: ConsumerTarget, *, toxiproxy: ToxiproxyServer,
                 broker: BrokerService, workdir: Path, allow_remote: bool = False) -> None:
        self.target = target
        self.toxiproxy = toxiproxy
        self.workdir = workdir
        self.allow_remote = allow_remote
        self.run_id = uuid.uuid4().hex[:8]
        #: The run's broker, behind the port: nothing else here knows which one it is.
        self.broker = open_broker(target, broker, toxiproxy=toxiproxy, run_id=self.run_id,
                                  allow_remote=allow_remote)
        self.queue = self.broker.queue
        self.dead_letter_queue = self.broker.dead_letters
        self.instances: list[ConsumerInstance] = []
        #: Consumers whose connection the nemesis has cut or stalled: the broker does not
        #: count them, so readiness does not wait for them.
        self.cut_off: set[int] = set()
        #: Where each consumer process's events feed was read up to, by (instance, pid).
        self.feed_cursors: dict[tuple[int, int | None], int] = {}
        self.oracle: EffectOracle | None = None
        self.recorder: Recorder | None = None
        self._values: dict[str, Any] = {}
        self._hooks_http = httpx.Client(timeout=10.0)
        self._process_lock = threading.RLock()
        self._faketime: FaketimeClock | None = None
        #: How the consumer's clock is moved: its clock hook, or libfaketime from outside.
        self.clock: TargetClock | None = None
        #: Why the clock from outside could not be confirmed ([clock] without ``check``).
        self.clock_unconfirmed: str | None = None
        #: Seconds from publish to effect of an ordinary job, once a scenario measured them.
        self.measured_latency: float | None = None

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> ConsumerDeployment:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _start(self) -> None:
        self.broker.prepare()
        self.workdir.mkdir(parents=True, exist_ok=True)
        values: dict[str, Any] = {
            "python": sys.executable, "workdir": str(self.workdir.absolute()),
            "run": self.run_id, **self.broker.values,
        }
        if isinstance(self.target.effects, RecorderEffects):
            self.recorder = Recorder(self.target.effects.port or 0)
            values["recorder_url"] = self.recorder.url
        self._values = values
        if self.target.clock is not None:
            self._faketime = FaketimeClock(self.workdir / "clock")
            self.clock = self._faketime
        elif self.target.hooks.clock is not None:
            self.clock = HookClock(self.target.hooks.clock, self.hook)
        self.ensure_instances(1)
        if self._faketime is not None:
            self._confirm_clock()
        self.oracle = self._make_oracle()

    def _confirm_clock(self) -> None:
        """Move libfaketime's clock once and ask the consumer (``[clock] check`` on its port)
        whether it saw the jump; when it did not, the run goes on without a clock.  A consumer
        with no time endpoint cannot be asked: its jumps are recorded as unconfirmed."""
        assert self._faketime is not None and self.target.clock is not None
        check = self.target.clock.check
        if check is None or self.instances[0].port is None:
            self.clock_unconfirmed = ("the consumer's clock is moved with libfaketime, "
                                      "unconfirmed: [clock] has no check path to read its time")
            return
        url = self.admin_url() + check
        problem = confirm_jump(self._faketime, CONFIRMING_JUMP,
                               lambda: target_time(self._hooks_http, url, from_body=True))
        if problem is not None:
            self.clock = None
            self.clock_unconfirmed = problem

    def ensure_instances(self, count: int) -> None:
        if count > 1 and not self.target.shares_state:
            raise UsageError(f"target {self.target.name}: several consumers need "
                             "start.shared_state = true (they share one store)")
        while len(self.instances) < count:
            self.instances.append(self._start_instance(len(self.instances)))

    def _start_instance(self, number: int) -> ConsumerInstance:
        start = self.target.start
        link = self.broker.open_link(f"idem-{self.run_id}-consumer-{number}")
        port = free_port(start.host)
        values = {**self._values, "port": port, "instance": number, **link.values}
        env = {k: str(render_template(v, values)) for k, v in start.env.items()}
        if self.recorder is not None and isinstance(self.target.effects, RecorderEffects):
            env[self.target.effects.env] = self.recorder.url
        if self._faketime is not None:
            env = self._faketime.environment(env)
        ready_url = ready_port = None
        if start.ready == "http":
            ready_url = f"http://{start.host}:{port}{start.ready_path}"
        elif start.ready == "tcp":
            ready_port = (start.host, port)
        else:  # ready when the broker counts it: the harness then answers on a port of its
            # own (_launch), never on {port}, which the consumer may serve its feed on
            ready_port = (start.host, free_port(start.host))
        try:
            process = ManagedProcess(
            f"consumer {self.target.name}#{number}",
                [str(render_template(part, values)) for part in start.command],
                log_path=self.workdir / f"consumer-{number}.log",
                ready_url=ready_url, ready_port=ready_port, env=env, cwd=self._start_cwd(),
                start_timeout=start.ready_timeout)
        except BaseException:
            self.broker.close_link(link)
            raise
        instance = ConsumerInstance(number, link, process, port,
                                    ready_port[1] if start.ready in ("queue", "group")
                                    and ready_port else None)
        try:
            self._launch(instance)
        except BaseException:
            process.stop()
            self.broker.close_link(link)
            raise
        return instance

    def _launch(self, instance: ConsumerInstance) -> None:
        """Start the process and wait until it is ready: its own readiness check, or for
        ``ready = "queue"`` (``"group"``) the broker counting every connected consumer on the
        queue (in the group).

        A process start waits on a port that must be closed before and open after; a consumer
        with no port of its own (a Celery worker) gets one the harness opens itself, once the
        broker counts the consumer, so a consumer that exits or never consumes fails the start
        like any other."""
        self._wait_port_free(instance)
        if self.target.start.ready not in ("queue", "group"):
            with self._process_lock:
                instance.process.start()
            return
        others = [i for i in self.instances if i is not instance]
        connected = 1 + sum(1 for i in others
                            if i.process.running() and i.number not in self.cut_off)
        assert instance.ready_port is not None
        with (_OpensWhenConsuming(self, connected,
                                  (self.target.start.host, instance.ready_port)),
              self._process_lock):
            try:
                instance.process.start()
            except ServiceUnavailable as exc:  # the port is ours: say what it stood for
                state = self.broker.state()
                raise ServiceUnavailable(
                    exc.service, f"{exc.reason.replace('ready', 'consuming')}; the broker "
                    f"counts {state.consumers} consumer(s) on {self.broker.where()}, not "
                    f"{connected}",
                    f"{self.broker.readiness_fix()} ({exc.fix}); see {self.workdir}") from exc

    def _wait_port_free(self, instance: ConsumerInstance) -> None:
        """A consumer started again after a kill may find its port still held by the workers
        of its process group for a moment; its start would take their port for its own."""
        if instance.port is None:
            return
        deadline = time.monotonic() + _PORT_FREE_WAIT
        while _port_open(self.target.start.host, instance.port):
            if time.monotonic() > deadline:
                raise ServiceUnavailable(
                    f"consumer {self.target.name}#{instance.number}",
                    f"port {instance.port} is still in use {_PORT_FREE_WAIT:g} s after the "
                    "consumer was stopped", "a process outside the consumer's process group "
                    "holds it: let every worker run in the group the harness starts")
            time.sleep(_READY_POLL)

    def wait_for_consumers(self, count: int, *, timeout: float | None = None) -> QueueState:
        """Wait until the broker counts ``count`` consumers on the queue (after a reconnect)."""
        deadline = time.monotonic() + (timeout or self.target.start.ready_timeout)
        state = self.broker.state()
        while not (state.exists and state.consumers >= count):
            if time.monotonic() > deadline:
                raise ServiceUnavailable(
                    f"consumers of {self.target.name}",
                    f"the broker counts {state.consumers} consumer(s) on "
                    f"{self.broker.where()}, not {count}, after "
                    f"{timeout or self.target.start.ready_timeout:g} s",
                    f"{self.broker.readiness_fix()}; see {self.workdir}")
            time.sleep(0.05)
            state = self.broker.state()
        return state

    def _start_cwd(self) -> str | None:
        cwd = self.target.start.cwd
        if cwd is None or Path(cwd).is_absolute() or not self.target.source:
            return cwd
        return str(Path(self.target.source).absolute().parent / cwd)

    def _make_oracle(self) -> EffectOracle:
        values = {**self._values, "port": self.instances[0].port}
        values.pop("python", None)
        rendered = render_template(self.target.effects.model_dump(), values)
        effects = type(self.target.effects).model_validate(rendered)
        if isinstance(effects, HttpEffects):
            return HttpOracle(effects, base_url=self.admin_url(),
                              allow_remote=self.allow_remote)
        if isinstance(effects, SqlEffects):
            return SqlOracle(effects, allow_remote=self.allow_remote)
        assert self.recorder is not None
        return RecorderOracle(self.recorder)

    def admin_url(self, number: int = 0) -> str:
        return f"http://{self.target.start.host}:{self.instances[number].port}"

    def close(self) -> None:
        for instance in self.instances:
            instance.process.stop()
            with suppress(ServiceError):
                self.broker.close_link(instance.link)
        self.instances = []
        if self.oracle is not None:
            self.oracle.close()
            self.oracle = None
        elif self.recorder is not None:
            self.recorder.close()
        self.recorder = None
        self._hooks_http.close()
        with suppress(ServiceError):
            self.broker.close()
        if self._faketime is not None:
            self._faketime.close()

    # ---- process faults --------------------------------------------------------------------

    def kill(self, number: int = 0) -> None:
        with self._process_lock:
            self.instances[number].process.kill()

    def stop(self, number: int = 0) -> None:
        """Stop a consumer gracefully (SIGTERM): what it had not acked goes back to the queue."""
        with self._process_lock:
            self.instances[number].process.stop()

    def start_again(self, number: int = 0) -> None:
        """Start a consumer again (after a kill, a stop or an exit) and wait until it consumes."""
        instance = self.instances[number]
        with self._process_lock:
            if instance.process.running():
                instance.process.kill()
        self._launch(instance)

    def running(self) -> int:
        return sum(1 for i in self.instances if i.process.running())

    def exited_by_themselves(self) -> list[tuple[int, int]]:
        exited = []
        with self._process_lock:
            for instance in self.instances:
                if instance.process.running():
                    continue
                code = instance.process.wait_exit(0)
                if code is not None:
                    exited.append((instance.number, code))
        return exited

    # ---- hooks -----------------------------------------------------------------------------

    def hook(self, method: str, path: str, body: Any = None,
             values: Mapping[str, Any] | None = None, *, number: int = 0,
             query: Mapping[str, Any] | None = None) -> Any:
        """Call an HTTP hook on consumer ``number``'s port."""
        if self.instances[number].port is None:
            raise UsageError(f"target {self.target.name} serves no HTTP port for hooks")
        filled = {**self._values, **(values or {})}
        path = str(render_template(path, filled))
        body = render_template(body, filled) if body else None
        try:
            response = self._hooks_http.request(method, self.admin_url(number) + path,
                                                json=body, params=query)
            response.raise_for_status()
            return response.json() if response.content else None
        except (httpx.HTTPError, ValueError) as exc:
            raise ServiceError(f"hook {method} {path} failed: {exc}; check [hooks] in "
                               f"{self.target.source}") from exc

    def advance_clock(self, seconds: float) -> str:
        """Move the consumers' clock once, and say how: the clock hook goes through the first
        consumer (consumers that share state share the clock with their store), libfaketime's
        offset file moves every process at once."""
        if self.clock is None:
            raise UsageError(self.clock_unconfirmed
                             or f"target {self.target.name} has no clock the harness can move")
        self.clock.advance(seconds)
        if self._faketime is not None and self.clock_unconfirmed:
            return f"{self.clock.via} (unconfirmed)"
        return self.clock.via

    def store_size(self) -> dict[str, int]:
        return read_store_size(self.target, self.hook, self._values)

    def cleanup(self) -> None:
        run_cleanup(self.target, self.hook)


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((host, port)) == 0


class _OpensWhenConsuming:
    """A loopback port that starts listening once the broker counts ``count`` consumers on the
    deployment's queue (members of its group): the readiness signal of a consumer with no port
    of its own.  Closed on exit, whether the consumer came up or not."""

    def __init__(self, deployment: ConsumerDeployment, count: int,
                 address: tuple[str, int]) -> None:
        self._deployment = deployment
        self._count = count
        self._address = address
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="consumer-ready", daemon=True)
        self._listener: socket.socket | None = None

    def __enter__(self) -> _OpensWhenConsuming:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()
        if self._listener is not None:
            self._listener.close()

    def _watch(self) -> None:
        broker = self._deployment.broker
        while not self._done.wait(_READY_POLL):
            with suppress(ServiceError):
                state = broker.state()
                if state.exists and state.consumers >= self._count:
                    # a port taken by another process since it was chosen (rare): the start's
                    # own check decides, with no thread's traceback
                    with suppress(OSError):
                        self._listener = socket.create_server(self._address)
                    return

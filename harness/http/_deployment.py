"""The target as a run sees it: its instances, each behind its own Toxiproxy proxy.

Started or found, with its side-effect oracle and its hooks.

Clients talk to the proxies; the oracle and the hooks talk to the target directly, so a fault
meant for a client's request never blinds the judge or the clock.  The clock is the target's
hook or libfaketime around its processes (``[clock]``); a clock moved from outside is confirmed
once the target is up, and when the target did not see the jump the run goes on without a clock,
saying why.
"""

from __future__ import annotations

import socket
import sys
import threading
import uuid
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from harness._clock import (
    CONFIRMING_JUMP,
    ClockAfterRestart,
    ClockKeeper,
    HookClock,
    TargetClock,
    confirm_jump,
    target_time,
)
from harness._errors import ServiceError, ServiceUnavailable, UsageError
from harness._target import (
    HttpEffects,
    RecorderEffects,
    SqlEffects,
    Target,
    render_template,
)
from harness.evidence._oracle import EffectOracle, HttpOracle, RecorderOracle, SqlOracle
from harness.evidence._store_size import read_store_size, run_cleanup
from harness.services._commit_proxy import CommitProxy
from harness.services._faketime import FaketimeClock
from harness.services._network import free_port, require_loopback
from harness.services._processes import ManagedProcess, start_on_a_free_port
from harness.services._recorder import Recorder
from harness.services._toxiproxy import ToxiproxyProxy, ToxiproxyServer

__all__ = ["Deployment", "Instance"]

@dataclass
class Instance:
    """One target process (or the one running target) and the proxy in front of it."""

    number: int
    direct_url: str
    proxy: ToxiproxyProxy
    process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """Where clients send requests: through the proxy."""
        return self.proxy.url


def _check_answers(url: str, source: str) -> None:
    """A running target must accept connections before the first scenario: otherwise every
    scenario would spend its retries on a service that is not there."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=3):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ServiceUnavailable(
            f"the service at {url}", f"it does not answer ({reason.lower()})",
            f"start it first, or give a [start] table in {source} so the harness starts it",
        ) from exc


class Deployment:
    """Starts what the target file asks for and tears all of it down on ``close``."""

    def __init__(
        self,
        target: Target,
        *,
        toxiproxy: ToxiproxyServer,
        workdir: Path,
        instances: int = 1,
        allow_remote: bool = False,
    ) -> None:
        if instances < 1:
            raise UsageError("a deployment needs at least one instance")
        self.target = target
        self.toxiproxy = toxiproxy
        self.workdir = workdir
        self.allow_remote = allow_remote
        self.run_id = uuid.uuid4().hex[:8]
        self.instances: list[Instance] = []
        self.store_proxy: ToxiproxyProxy | None = None
        #: The proxy that reads the store's protocol, behind Toxiproxy's store proxy, when
        #: ``[store_proxy] protocol`` names one.
        self.commit_proxy: CommitProxy | None = None
        self.recorder: Recorder | None = None
        self.oracle: EffectOracle | None = None
        self._wanted = instances
        self._values: dict[str, Any] = {}
        self._hooks_http = httpx.Client(timeout=10.0)
        self._faketime: FaketimeClock | None = None
        self.clock: TargetClock | None = None
        #: Every jump the harness made, kept across restarts (``ClockKeeper``).
        self.clock_keeper: ClockKeeper | None = None
        #: Why a capability the target file declares is not there after all (``clock``: the
        #: target did not see a jump made from outside), for the scenarios that need it.
        self.missing: dict[str, str] = {}
        # Kills, deliberate crashes and the search for processes that exited by themselves
        # take turns, so a process the nemesis is killing is never taken for one that died.
        self._process_lock = threading.RLock()

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> Deployment:
        try:
            self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # Absolute: the target may run in another directory (start.cwd) than the harness.
        values: dict[str, Any] = {"python": sys.executable, "workdir": str(self.workdir.absolute())}
        effects = self.target.effects
        if isinstance(effects, RecorderEffects):
            self.recorder = Recorder(effects.port or 0)
            values["recorder_url"] = self.recorder.url
        store = self.target.store_proxy
        if store is not None:
            upstream = store.upstream
            if store.picks_port:  # the target starts its database on the port chosen here
                values["store_port"] = free_port()
                upstream = str(render_template(upstream, values))
            if store.reads_writes:  # target -> Toxiproxy -> the protocol's proxy -> store
                assert store.protocol != "tcp"
                require_loopback(upstream, allow_remote=self.allow_remote)
                self.commit_proxy = CommitProxy(upstream, store.protocol).start()
                upstream = self.commit_proxy.listen
            self.store_proxy = self.toxiproxy.client.create_proxy(
                f"idem-{self.run_id}-store", upstream)
            values["store_proxy"] = self.store_proxy.listen
        self._values = values
        if self.target.clock is not None:
            self._faketime = FaketimeClock(self.workdir / "clock")
            self.clock = self._faketime
            self.clock_keeper = ClockKeeper(self._faketime, survives=True)
        elif self.target.hooks.clock is not None:
            hook = self.target.hooks.clock
            self.clock = HookClock(hook, self._hook)
            self.clock_keeper = ClockKeeper(self.clock, read=self._clock_reader(),
                                            restart_resets=hook.restart_resets)
        self.ensure_instances(self._wanted)
        if self.clock_keeper is not None:
            self.clock_keeper.calibrate()
        if self._faketime is not None:
            self._confirm_clock()
        self.oracle = self._make_oracle()

    def _clock_reader(self) -> Callable[[], float] | None:
        """How to ask the target its time, when its clock hook says (``read``)."""
        hook = self.target.hooks.clock
        if hook is None or hook.read is None:
            return None
        path, field = hook.read, hook.read_field
        return lambda: target_time(self._hooks_http, self.instances[0].direct_url + path,
                                   from_body=True, field=field)

    def _confirm_clock(self) -> None:
        """Move the clock from outside once and ask the target whether it saw the jump; when
        it did not, the deployment goes on without a clock and ``missing`` says why."""
        assert self._faketime is not None
        assert self.target.clock is not None and self.target.start is not None
        check = self.target.clock.check
        url = self.instances[0].direct_url + (check or self.target.start.ready_path)
        problem = confirm_jump(
            self._faketime, CONFIRMING_JUMP,
            lambda: target_time(self._hooks_http, url, from_body=check is not None))
        if problem is not None:
            self.clock = None
            self.clock_keeper = None
            self.missing["clock"] = problem
            self.target = self.target.without_clock_from_outside()

    def ensure_instances(self, count: int) -> None:
        """Run at least ``count`` instances, each on its own port behind its own proxy."""
        if count > 1 and self.target.start is None:
            raise UsageError(f"target {self.target.name} runs elsewhere: the harness cannot "
                             f"start {count} instances of it; give a [start] table")
        while len(self.instances) < count:
            self.instances.append(self._start_instance(len(self.instances), self._values))

    def _start_instance(self, number: int, values: dict[str, Any]) -> Instance:
        start = self.target.start
        process = None
        if start is None:
            assert self.target.url is not None
            direct_url = self.target.url.rstrip("/")
            require_loopback(direct_url, allow_remote=self.allow_remote)
            _check_answers(direct_url, self.target.source)
        else:
            require_loopback(start.host, allow_remote=self.allow_remote)
            port, process = start_on_a_free_port(start.host, lambda port: self._process(
                number, {**values, "port": port, "instance": number}))
            direct_url = f"http://{start.host}:{port}"
        parts = urlsplit(direct_url)
        proxy = self.toxiproxy.client.create_proxy(
            f"idem-{self.run_id}-{number}", f"{parts.hostname}:{parts.port or 80}"
        )
        return Instance(number, direct_url, proxy, process)

    def _process(self, number: int, values: dict[str, Any]) -> ManagedProcess:
        start = self.target.start
        assert start is not None
        env = {k: str(render_template(v, values)) for k, v in start.env.items()}
        if isinstance(self.target.effects, RecorderEffects):
            env[self.target.effects.env] = values["recorder_url"]
        if self._faketime is not None:
            env = self._faketime.environment(env)
        ready_url = f"http://{start.host}:{values['port']}{start.ready_path}"
        return ManagedProcess(
            f"target {self.target.name}#{number}",
            [str(render_template(part, values)) for part in start.command],
            log_path=self.workdir / f"target-{number}.log",
            ready_url=ready_url if start.ready == "http" else None,
            ready_port=(start.host, values["port"]) if start.ready == "tcp" else None,
            env=env,
            cwd=self._start_cwd(),
            start_timeout=start.ready_timeout,
            ready_hint=(f"check [start] ready_path ({start.ready_path!r}) in "
                        f"{self.target.source or 'the target file'}: it must be a path the "
                        "service answers with 2xx once it is up (or set ready = \"tcp\")"),
        )

    def _start_cwd(self) -> str | None:
        """``start.cwd``; a relative one is taken from the target file's directory, so a target
        file that ships beside its app works from any current directory."""
        cwd = self.target.start.cwd if self.target.start else None
        if cwd is None or Path(cwd).is_absolute() or not self.target.source:
            return cwd
        return str(Path(self.target.source).absolute().parent / cwd)

    def _make_oracle(self) -> EffectOracle:
        effects = self._rendered_effects()
        if isinstance(effects, HttpEffects):
            return HttpOracle(effects, base_url=self.instances[0].direct_url,
                              allow_remote=self.allow_remote)
        if isinstance(effects, SqlEffects):
            return SqlOracle(effects, allow_remote=self.allow_remote)
        assert self.recorder is not None
        return RecorderOracle(self.recorder)

    def _rendered_effects(self) -> HttpEffects | SqlEffects | RecorderEffects:
        """``[effects]`` with ``{workdir}``, ``{port}`` and ``{store_proxy}`` filled in (a
        SQLite ledger in the target's work directory, an effects URL on the first process);
        ``{tenant}`` and ``{key}`` stay for each question."""
        first = urlsplit(self.instances[0].direct_url)
        values = {**self._values, "port": first.port}
        values.pop("python", None)
        rendered = render_template(self.target.effects.model_dump(), values)
        return type(self.target.effects).model_validate(rendered)

    def close(self) -> None:
        """Stop everything this deployment started; safe to call twice and after a failure."""
        for instance in self.instances:
            with suppress(ServiceError):  # Toxiproxy is going away too; nothing left to clean
                instance.proxy.delete()
            if instance.process is not None:
                instance.process.stop()
        self.instances = []
        if self.store_proxy is not None:
            with suppress(ServiceError):
                self.store_proxy.delete()
            self.store_proxy = None
        if self.commit_proxy is not None:
            self.commit_proxy.close()
            self.commit_proxy = None
        if self.oracle is not None:
            self.oracle.close()
            self.oracle = None
        elif self.recorder is not None:
            self.recorder.close()
        self.recorder = None
        if self._faketime is not None:
            self._faketime.close()
        self._hooks_http.close()

    def __enter__(self) -> Deployment:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ---- process faults --------------------------------------------------------------------

    def kill(self, number: int = 0) -> None:
        process = self._managed(number)
        with self._process_lock:
            process.kill()

    def restart(self, number: int = 0) -> ClockAfterRestart:
        """Start instance ``number`` again on the same port, behind the same proxy, its clock
        brought back to the harness's account."""
        return self._start_again(self._managed(number))

    def start_again(self, number: int) -> ClockAfterRestart:
        """Start instance ``number`` again after it exited by itself; unlike ``restart`` this
        does not ask for a restartable target: the harness started it and the run goes on."""
        process = self.instances[number].process
        if process is None:
            return ClockAfterRestart("kept")
        return self._start_again(process)

    def _start_again(self, process: ManagedProcess) -> ClockAfterRestart:
        with self._process_lock:
            if process.running():
                process.kill()
            process.start()
        return (self.clock_keeper.after_restart() if self.clock_keeper is not None
                else ClockAfterRestart("kept"))

    @property
    def clock_known(self) -> bool:
        """Does the harness know the target's clock (no restart has left it unknown)?"""
        return self.clock_keeper is None or self.clock_keeper.trusted

    def wait_for_exit(self, number: int = 0, *, timeout: float = 10.0) -> bool:
        """Wait for the instance to die by itself (a crash hook fired); True if it did."""
        process = self._managed(number)
        with self._process_lock:
            return process.wait_exit(timeout) is not None

    def is_running(self, number: int = 0) -> bool:
        process = self.instances[number].process
        return process is None or process.running()

    def exited_by_themselves(self) -> list[tuple[int, int]]:
        """Instances whose process ended on its own since the last look, with the return code
        of each: not killed by the nemesis, not a crash hook the harness fired and waited for
        (both take the process's exit themselves).  Cheap: a ``poll`` per process."""
        exited = []
        with self._process_lock:
            for instance in self.instances:
                process = instance.process
                if process is None or process.running():
                    continue
                code = process.wait_exit(0)
                if code is not None:
                    exited.append((instance.number, code))
        return exited

    def restart_dead_instances(self) -> None:
        """Bring back every instance that died (a crash a scenario or story caused, or one
        nobody expected), so the next one starts against a running target.  The harness
        started them, so it starts them again even when the target file does not call them
        restartable: the rest of the run needs a target to talk to."""
        for instance in self.instances:
            if instance.process is not None and not instance.process.running():
                self._start_again(instance.process)

    def check_restartable(self, number: int = 0) -> None:
        """Refuse now, with the fix, what ``kill`` and ``restart`` of ``number`` would refuse."""
        self._managed(number)

    def _managed(self, number: int) -> ManagedProcess:
        process = self.instances[number].process
        if process is None or not self.target.can_restart:
            raise UsageError(f"target {self.target.name} was not started by the harness as "
                             "restartable; set start.restartable = true")
        return process

    # ---- hooks -----------------------------------------------------------------------------

    def _hook(self, method: str, path: str, body: Any = None,
              values: Mapping[str, Any] | None = None) -> Any:
        """Call a hook on the first process; ``values`` fill the placeholders of its path
        (query string included) and body, and an empty body sends none."""
        filled = {**self._values, **(values or {})}
        path = str(render_template(path, filled))
        body = render_template(body, filled) if body else None
        url = self.instances[0].direct_url + path
        try:
            response = self._hooks_http.request(method, url, json=body)
            response.raise_for_status()
            return response.json() if response.content else None
        except (httpx.HTTPError, ValueError) as exc:
            raise ServiceError(f"hook {method} {path} failed: {exc}; check [hooks] in "
                               f"{self.target.source}") from exc

    def advance_clock(self, seconds: float) -> None:
        if self.clock_keeper is None:
            raise UsageError(self.missing.get("clock")
                             or f"target {self.target.name} has no clock the harness can move")
        self.clock_keeper.advance(seconds)

    def store_size(self) -> dict[str, int]:
        return read_store_size(self.target, self._hook, self._values,
                               allow_remote=self.allow_remote)

    def cleanup(self) -> None:
        run_cleanup(self.target, self._hook)

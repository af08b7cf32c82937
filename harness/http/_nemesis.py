"""The nemesis: faults applied to the target and recorded in the history as they act.

Network faults are Toxiproxy toxics on the client's proxy (or on the target's database proxy);
process faults kill and restart a target the harness started; the clock fault advances the
target's clock through its hook or, from outside, through libfaketime.  Toxiproxy's
``toxicity`` is drawn once per connection and its ``-seed`` flag does nothing since v2.9, so
faults are always applied at full toxicity, around exactly the requests the harness chose, and
removed afterwards whatever happens.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from harness._clock import ClockAfterRestart
from harness._errors import UsageError
from harness._history import NEMESIS, STORE, History
from harness._nemesis import Fault
from harness.http._deployment import Deployment
from harness.services._commit_proxy import AfterWrite, Watch, WriteSeen
from harness.services._toxiproxy import Stream, Toxic, ToxiproxyProxy

__all__ = ["FAULTS", "Nemesis", "fault_named"]

def _toxic(type_: str, stream: Stream, **attributes: int) -> Toxic:
    return Toxic(type_, stream, attributes)


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault("response-timeout", "the response is held back until the client gives up",
              _toxic("timeout", "downstream", timeout=0)),
        Fault("response-reset", "the connection is reset as the response starts",
              _toxic("reset_peer", "downstream", timeout=0)),
        Fault("response-cut", "the response is cut after 64 bytes",
              _toxic("limit_data", "downstream", bytes=64)),
        Fault("response-latency", "the response is delayed 300 ms ± 100 ms",
              _toxic("latency", "downstream", latency=300, jitter=100)),
        Fault("response-slicer", "the response arrives in small slices",
              _toxic("slicer", "downstream", average_size=16, size_variation=8, delay=2000)),
        Fault("response-bandwidth", "the response trickles at 1 KB/s",
              _toxic("bandwidth", "downstream", rate=1)),
        Fault("slow-close", "the connection lingers 500 ms before closing",
              _toxic("slow_close", "downstream", delay=500)),
        Fault("request-timeout", "the request is held back and never reaches the target",
              _toxic("timeout", "upstream", timeout=0)),
        Fault("request-reset", "the connection is reset as the request is sent",
              _toxic("reset_peer", "upstream", timeout=0)),
        Fault("request-cut", "the request is cut after 64 bytes",
              _toxic("limit_data", "upstream", bytes=64)),
        Fault("request-latency", "the request is delayed 300 ms ± 100 ms",
              _toxic("latency", "upstream", latency=300, jitter=100)),
        Fault("request-slicer", "the request arrives in small slices",
              _toxic("slicer", "upstream", average_size=16, size_variation=8, delay=2000)),
        Fault("proxy-down", "the proxy refuses connections"),
        Fault("store-reset", "the target's database connection is reset",
              _toxic("reset_peer", "downstream", timeout=0), where="store"),
        Fault("store-timeout", "the target's database stops answering",
              _toxic("timeout", "downstream", timeout=0), where="store"),
        Fault("store-latency", "the target's database answers 200 ms late",
              _toxic("latency", "downstream", latency=200, jitter=0), where="store"),
        Fault("store-down", "the target's database is unreachable", where="store"),
    )
}


def fault_named(name: str) -> Fault:
    try:
        return FAULTS[name]
    except KeyError:
        raise UsageError(f"unknown fault {name!r}; known faults: {', '.join(FAULTS)}") from None


class Nemesis:
    """Injects faults into one deployment and writes each into the history as it acts."""

    def __init__(self, deployment: Deployment, history: History) -> None:
        self.deployment = deployment
        self.history = history

    def _proxies(self, fault: Fault, instance: int | None) -> list[ToxiproxyProxy]:
        if fault.where == "store":
            if self.deployment.store_proxy is None:
                raise UsageError(f"fault {fault.name} needs [store_proxy] in the target file")
            return [self.deployment.store_proxy]
        instances = self.deployment.instances
        chosen = instances if instance is None else [instances[instance]]
        return [i.proxy for i in chosen]

    def inject(self, fault: Fault, *, instance: int | None = None) -> None:
        for proxy in self._proxies(fault, instance):
            if fault.toxic is None:
                proxy.disable()
            else:
                proxy.add_toxic(fault.toxic)
        self.history.record("info", "fault", NEMESIS, value=self._describe(fault, instance))

    def heal(self, fault: Fault, *, instance: int | None = None) -> None:
        for proxy in self._proxies(fault, instance):
            if fault.toxic is None:
                proxy.enable()
            else:
                proxy.remove_toxic(fault.toxic.effective_name)
        self.history.record("info", "heal", NEMESIS, value=self._describe(fault, instance))

    @staticmethod
    def _describe(fault: Fault, instance: int | None) -> dict[str, object]:
        """The fault as recorded; ``instance`` is absent when it acted on every instance."""
        return {**fault.describe(), **({"instance": instance} if instance is not None else {})}

    @contextmanager
    def fault(self, fault: Fault, *, instance: int | None = None) -> Iterator[None]:
        """The fault acts inside the block and is healed after it, even if the block fails."""
        self.inject(fault, instance=instance)
        try:
            yield
        finally:
            self.heal(fault, instance=instance)

    def heal_all(self) -> None:
        """Remove every toxic and re-enable every proxy: the end of every step."""
        proxies = [i.proxy for i in self.deployment.instances]
        if self.deployment.store_proxy is not None:
            proxies.append(self.deployment.store_proxy)
        for proxy in proxies:
            proxy.clear_toxics()
            proxy.enable()

    def kill(self, instance: int = 0) -> None:
        self.deployment.kill(instance)
        self.history.record("info", "crash", NEMESIS,
                            value={"how": "SIGKILL", "instance": instance})

    def crashed(self, how: str, instance: int = 0) -> None:
        """Record a crash the target performed itself (its crash hook fired)."""
        self.history.record("info", "crash", NEMESIS, value={"how": how, "instance": instance})

    def exited(self, instance: int, code: int, scenario: str) -> None:
        """Record a target process that ended by itself, neither killed by the nemesis nor
        crashed through its hook: the checker reports it (a service must not exit on a fault
        it should survive), so it is written down before anything restarts the process."""
        self.history.record("info", "exit", NEMESIS,
                            value={"instance": instance, "code": code, "scenario": scenario})

    def restart(self, instance: int = 0) -> None:
        self.restarted(instance, self.deployment.restart(instance))

    def restarted(self, instance: int, clock: ClockAfterRestart) -> None:
        """Record a restart, with where the target's clock stood after it; a clock found
        ahead of the harness's account is also a jump the judge must count."""
        self.history.record("info", "restart", NEMESIS,
                            value={"instance": instance, **clock.describe()})
        if clock.outcome == "ahead":
            self.history.record("info", "clock", NEMESIS,
                                value={"seconds": clock.seconds, "via": "restart"})

    def advance_clock(self, seconds: float) -> None:
        self.deployment.advance_clock(seconds)
        via = self.deployment.clock.via if self.deployment.clock else None
        self.history.record("info", "clock", NEMESIS, value={"seconds": seconds, "via": via})

    # ---- faults at a write (the store proxy that reads the protocol) ------------------------

    @contextmanager
    def watching_writes(self, key: str, tenant: str | None, *, plan: AfterWrite | None = None,
                        instance: int = 0) -> Iterator[Watch]:
        """Count the writes of the request with ``key`` while the block runs, each recorded as
        a ``store-write`` event, and strike as ``plan`` says; a planned fault that did not
        strike by the end of the block is recorded as ``store-fault-missed``."""
        proxy = self.deployment.commit_proxy
        if proxy is None:
            raise UsageError(f"target {self.deployment.target.name} has no store proxy that "
                             "reads its protocol; set [store_proxy] protocol")
        if plan is not None and plan.fault == "kill":
            self.deployment.check_restartable(instance)
        listener = _WriteRecorder(self, proxy.protocol, instance)
        with proxy.watching(key, tenant, listener, plan=plan) as watch:
            yield watch
            proxy.settle(watch)
        if watch.missed:
            assert plan is not None
            self.history.record("info", "store-fault-missed", NEMESIS, key=key, tenant=tenant,
                                value={**_planned(plan), "writes": len(watch.writes)})


def _planned(plan: AfterWrite) -> dict[str, object]:
    """A fault at a write as the history names it: ``cut-after-write``, the write, the hold."""
    return {"fault": f"{plan.fault}-after-write", "where": "store", "after_write": plan.write,
            **({"hold": plan.hold} if plan.fault == "hold" else {})}


class _WriteRecorder:
    """Writes a watch's writes and its strike into the history, from the proxy's thread; for
    ``kill`` it kills the target before the acknowledgement is dropped."""

    def __init__(self, nemesis: Nemesis, protocol: str, instance: int) -> None:
        self.nemesis = nemesis
        self.protocol = protocol
        self.instance = instance

    def wrote(self, watch: Watch, write: WriteSeen) -> None:
        self.nemesis.history.record("ok", "store-write", STORE, key=watch.key,
                                    tenant=watch.tenant,
                                    value={**write.describe(), "protocol": self.protocol})

    def striking(self, watch: Watch, write: WriteSeen) -> None:
        assert watch.plan is not None
        where = {**_planned(watch.plan), **write.describe()}
        history = self.nemesis.history
        if watch.plan.fault == "kill":
            self.nemesis.deployment.kill(self.instance)
            history.record("info", "crash", NEMESIS, key=watch.key, tenant=watch.tenant,
                           value={"how": f"SIGKILL after store write {write.number}",
                                  "instance": self.instance, **where})
        else:
            history.record("info", "fault", NEMESIS, key=watch.key, tenant=watch.tenant,
                           value=where)

    def released(self, watch: Watch, write: WriteSeen) -> None:
        assert watch.plan is not None
        if watch.plan.fault != "kill":
            self.nemesis.history.record("info", "heal", NEMESIS, key=watch.key,
                                        tenant=watch.tenant,
                                        value={**_planned(watch.plan), **write.describe()})

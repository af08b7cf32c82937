"""Faults on a consumer: its broker connection, its process and its clock, recorded as they act.

Toxiproxy toxics on its connection's proxy, SIGKILL and restart, clock moves; each recorded in
the history in the same shape as an HTTP target's (``fault``/``heal``, ``crash``, ``restart``,
``clock``).

Toxiproxy's ``timeout`` toxic with ``timeout = 0`` holds data until the toxic is removed, and
then lets it through: a scenario that holds an ack back cuts the connection (``connection-cut``
disables the proxy, which discards what was held) before it heals.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from harness._history import NEMESIS, History
from harness._nemesis import Fault
from harness.consumer._deployment import ConsumerDeployment
from harness.services._toxiproxy import Toxic, ToxiproxyProxy

__all__ = ["CONSUMER_FAULTS", "ConsumerNemesis"]

CONSUMER_FAULTS: dict[str, Fault] = {
    f.name: f for f in (
        Fault("ack-held", "nothing the consumer sends reaches the broker (its ack is held)",
              Toxic("timeout", "upstream", {"timeout": 0})),
        Fault("connection-stall", "the consumer's connection goes silent both ways",
              Toxic("timeout", "downstream", {"timeout": 0}, name="stall_downstream")),
        Fault("connection-cut", "the consumer's connection to the broker is closed"),
        Fault("confirm-lost", "the broker's confirms never reach the producer",
              Toxic("timeout", "downstream", {"timeout": 0}), where="client"),
    )
}
_STALL_UP = Toxic("timeout", "upstream", {"timeout": 0}, name="stall_upstream")


class ConsumerNemesis:
    """``before`` runs ahead of every fault, heal, kill and clock move: the scenario reads the
    consumers' events feeds there, so whatever a consumer did before the nemesis acted is in
    the history before the nemesis's own event (an ack sent while acks were held stays inside
    the hold)."""

    def __init__(self, deployment: ConsumerDeployment, history: History, *,
                 before: Callable[[], None] | None = None) -> None:
        self.deployment = deployment
        self.history = history
        self._before = before or (lambda: None)

    def _record(self, f: str, fault: Fault, instance: int) -> None:
        self.history.record("info", f, NEMESIS, value={"fault": fault.name, "where": "consumer",
                                                       "instance": instance})

    def inject(self, name: str, instance: int = 0) -> None:
        self._before()
        fault = CONSUMER_FAULTS[name]
        proxy = self.deployment.instances[instance].proxy
        if fault.toxic is None:
            proxy.disable()
        else:
            proxy.add_toxic(fault.toxic)
            if name == "connection-stall":
                proxy.add_toxic(_STALL_UP)
        if name != "ack-held":
            self.deployment.cut_off.add(instance)
        self._record("fault", fault, instance)

    def heal(self, name: str, instance: int = 0) -> None:
        """Remove the fault; the consumer reconnects when its connection was lost."""
        self._before()
        fault = CONSUMER_FAULTS[name]
        proxy = self.deployment.instances[instance].proxy
        if fault.toxic is None:
            proxy.enable()
        else:
            proxy.remove_toxic(fault.toxic.effective_name)
            if name == "connection-stall":
                proxy.remove_toxic(_STALL_UP.effective_name)
        self.deployment.cut_off.discard(instance)
        self._record("heal", fault, instance)

    @contextmanager
    def fault(self, name: str, instance: int = 0) -> Iterator[None]:
        self.inject(name, instance)
        try:
            yield
        finally:
            self.heal(name, instance)

    @contextmanager
    def producer_fault(self, proxy: ToxiproxyProxy) -> Iterator[None]:
        """Hold back what the broker sends the producer (its confirms) inside the block; the
        connection is cut before the hold is lifted, so nothing held arrives late."""
        fault = CONSUMER_FAULTS["confirm-lost"]
        assert fault.toxic is not None
        proxy.add_toxic(fault.toxic)
        self.history.record("info", "fault", NEMESIS, value={"fault": fault.name,
                                                            "where": "producer"})
        try:
            yield
        finally:
            proxy.disable()
            proxy.remove_toxic(fault.toxic.effective_name)
            proxy.enable()
            self.history.record("info", "heal", NEMESIS, value={"fault": fault.name,
                                                               "where": "producer"})

    def heal_all(self) -> None:
        for instance in self.deployment.instances:
            instance.proxy.clear_toxics()
            instance.proxy.enable()
        self.deployment.cut_off.clear()

    @contextmanager
    def outliving(self, what: str, instance: int) -> Iterator[None]:
        """Record, as a fault on consumer ``instance`` for the block, something the harness
        brought about without a toxic: a job kept past the poll interval, so that the group
        hands its partition to another member (``poll-interval-outlived``)."""
        self._before()
        self.history.record("info", "fault", NEMESIS, value={
            "fault": what, "where": "consumer", "instance": instance})
        try:
            yield
        finally:
            self._before()
            self.history.record("info", "heal", NEMESIS, value={
                "fault": what, "where": "consumer", "instance": instance})

    def rewind(self, offsets: dict[int, int] | None) -> dict[int, int]:
        """Set the consumers' place in the queue back (a Kafka group's committed offsets; every
        consumer stopped): what was read since is read again."""
        self._before()
        done = self.deployment.broker.rewind(offsets)
        self.history.record("info", "rewind", NEMESIS, value={
            "offsets": {str(p): o for p, o in sorted(done.items())}})
        return done

    def kill(self, instance: int = 0) -> None:
        self._before()
        self.deployment.kill(instance)
        self.history.record("info", "crash", NEMESIS,
                            value={"how": "SIGKILL", "instance": instance})

    def restart(self, instance: int = 0) -> None:
        self.deployment.start_again(instance)
        self.history.record("info", "restart", NEMESIS, value={"instance": instance})

    def exited(self, instance: int, code: int, scenario: str) -> None:
        self.history.record("info", "exit", NEMESIS,
                            value={"instance": instance, "code": code, "scenario": scenario})

    def advance_clock(self, seconds: float) -> None:
        self._before()
        via = self.deployment.advance_clock(seconds)
        self.history.record("info", "clock", NEMESIS, value={"seconds": seconds, "via": via})

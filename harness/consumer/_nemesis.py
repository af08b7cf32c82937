"""Faults on a consumer: its broker connection (Toxiproxy toxics on its proxy), its process
(SIGKILL, restart) and its clock, each recorded in the history as it acts, in the same shape as
an HTTP target's (``fault``/``heal``, ``crash``, ``restart``, ``clock``).

Toxiproxy's ``timeout`` toxic with ``timeout = 0`` holds data until the toxic is removed, and
then lets it through: so a held ack is never released by healing; the connection is cut first
(the proxy disabled), which discards what was held, and only then is the toxic removed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from harness._history import NEMESIS, History
from harness._nemesis import Fault
from harness._toxiproxy import Toxic
from harness.consumer._deployment import ConsumerDeployment

__all__ = ["CONSUMER_FAULTS", "ConsumerNemesis"]

CONSUMER_FAULTS: dict[str, Fault] = {
    f.name: f for f in (
        Fault("ack-held", "nothing the consumer sends reaches the broker (its ack is held)",
              Toxic("timeout", "upstream", {"timeout": 0})),
        Fault("connection-stall", "the consumer's connection goes silent both ways",
              Toxic("timeout", "downstream", {"timeout": 0}, name="stall_downstream")),
        Fault("connection-cut", "the consumer's connection to the broker is closed"),
    )
}
_STALL_UP = Toxic("timeout", "upstream", {"timeout": 0}, name="stall_upstream")


class ConsumerNemesis:
    def __init__(self, deployment: ConsumerDeployment, history: History) -> None:
        self.deployment = deployment
        self.history = history

    def _record(self, f: str, fault: Fault, instance: int) -> None:
        self.history.record("info", f, NEMESIS, value={"fault": fault.name, "where": "consumer",
                                                       "instance": instance})

    def inject(self, name: str, instance: int = 0) -> None:
        fault = CONSUMER_FAULTS[name]
        proxy = self.deployment.instances[instance].proxy
        if fault.toxic is None:
            proxy.disable()
        else:
            proxy.add_toxic(fault.toxic)
            if name == "connection-stall":
                proxy.add_toxic(_STALL_UP)
        self._record("fault", fault, instance)

    def heal(self, name: str, instance: int = 0) -> None:
        """Cut what a held toxic holds, then remove the toxic and let the consumer reconnect."""
        fault = CONSUMER_FAULTS[name]
        proxy = self.deployment.instances[instance].proxy
        proxy.disable()
        proxy.clear_toxics()
        proxy.enable()
        self._record("heal", fault, instance)

    @contextmanager
    def fault(self, name: str, instance: int = 0) -> Iterator[None]:
        self.inject(name, instance)
        try:
            yield
        finally:
            self.heal(name, instance)

    def heal_all(self) -> None:
        for instance in self.deployment.instances:
            instance.proxy.clear_toxics()
            instance.proxy.enable()

    def kill(self, instance: int = 0) -> None:
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
        self.deployment.advance_clock(seconds)
        self.history.record("info", "clock", NEMESIS, value={"seconds": seconds})

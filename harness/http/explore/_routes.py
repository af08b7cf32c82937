"""Network faults for the explorer: each set of active faults on a proxy of its own.

Toxiproxy 2.12 keeps a connection's chain of toxics in step with its proxy's only while no
toxic that closes connections (reset_peer, timeout) is removed under it; once that happened,
adding a toxic to the same proxy panics the server (``ToxicLink.AddToxic``: index out of range).
The explorer switches faults on and off many times while connections are still open, so it
never changes the toxics of a proxy that has carried traffic: every set of active faults gets a
fresh proxy in front of the target, its toxics in place before the first connection, and the
client is pointed at it.  A connection opened earlier keeps the faults it met, as it would.
The events in the history are the nemesis's own ``fault`` and ``heal``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import suppress
from urllib.parse import urlsplit

from harness._errors import ServiceError
from harness._history import NEMESIS
from harness._nemesis import Fault
from harness.http._context import ScenarioContext
from harness.services._toxiproxy import ToxiproxyProxy

__all__ = ["Routes"]


class Routes:
    """Where the example's client sends its requests, given the faults that are on."""

    def __init__(self, context: ScenarioContext) -> None:
        self.context = context
        self._direct = list(context.client.urls)
        self._proxies: list[ToxiproxyProxy] = []

    def record(self, fault: Fault, *, on: bool) -> None:
        self.context.history.record("info", "fault" if on else "heal", NEMESIS,
                                    value=fault.describe())

    def route(self, faults: Sequence[Fault]) -> None:
        """Send the next requests through a proxy that has exactly ``faults``."""
        if not faults:
            self.context.client.urls = list(self._direct)
            return
        deployment = self.context.deployment
        target = urlsplit(deployment.instances[0].direct_url)
        proxy = deployment.toxiproxy.client.create_proxy(
            f"idem-{deployment.run_id}-{uuid.uuid4().hex[:8]}",
            f"{target.hostname}:{target.port or 80}")
        self._proxies.append(proxy)
        for fault in faults:
            if fault.toxic is not None:
                proxy.add_toxic(fault.toxic)
        if any(fault.proxy_down for fault in faults):
            proxy.disable()
        self.context.client.urls = [proxy.url]

    def close(self) -> None:
        """Delete the example's proxies, and with them any connection a fault still holds."""
        self.context.client.urls = list(self._direct)
        for proxy in self._proxies:
            with suppress(ServiceError):
                proxy.delete()
        self._proxies = []

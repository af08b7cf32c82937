"""One Locust process's share of the load: its customers, their history, and Locust's view of it.

Runs only inside a Locust process (gevent has patched the standard library there).  The
recording client is the engine's own ``RecordingClient``, so the events are every other front
end's, sending through kept-alive connections (``KeptAliveClient``, ``_transport``): about 0.6 ms
of CPU per recorded attempt, against 0.4 ms for bare Locust ``FastHttpUser`` sending the same
charges unrecorded (``bench/load.py``).

Each charge runs in a greenlet of its own rather than in the Locust user's: when the run stops,
Locust kills its users at once, and a charge cut off half-way through its retries would turn into
a give-up that the harness made, not the target.  ``ship`` waits for the charges still running
(bounded by the retry budget), then sends the history to whoever collects it, through Locust's
own messages, so the same code serves a local run and a worker on another machine.  Times travel
as wall-clock seconds, the one clock every process shares.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

import gevent.pool
from locust.event import Events
from locust.runners import Runner

from harness._history import Event, History
from harness.http.load._charges import Customer
from harness.http.load._plan import LoadPlan
from harness.http.load._transport import KeptAliveClient

__all__ = ["HISTORY_MESSAGE", "LoadNode"]

HISTORY_MESSAGE = "idem-history"


_FIELDS = tuple(f.name for f in fields(Event))


def _wire(event: Event, origin: float) -> dict[str, Any]:
    """``event_to_json`` with wall-clock time, eight times faster (it skips ``asdict``'s deep
    copy): a history of a hundred thousand events is shipped at the end of every run."""
    data = {name: value for name in _FIELDS if (value := getattr(event, name)) is not None}
    for name in ("headers", "value"):
        if name in data:
            if data[name]:
                data[name] = dict(data[name])
            else:
                del data[name]
    data["time"] = origin + event.time
    return data


class AttemptFailed(Exception):
    """What Locust's statistics record for an attempt without a 2xx: its status or error."""


class _StatsBridge:
    """Turns each completed attempt in the history into one Locust ``request`` event, named by
    whether it was a first attempt or a retry, so Locust's tables keep them apart."""

    def __init__(self, events: Events) -> None:
        self._events = events
        self._open: dict[int, Event] = {}

    def __call__(self, event: Event) -> None:
        if event.f != "request":
            return
        if event.type == "invoke":
            self._open[event.op] = event
            return
        invoke = self._open.pop(event.op, None)
        if invoke is None:
            return
        kind = "first attempt" if invoke.attempt == 1 else "retry"
        failure = None
        if event.type != "ok":
            failure = AttemptFailed(str(event.status) if event.status else event.error)
        self._events.request.fire(  # type: ignore[no-untyped-call]
            request_type=invoke.method or "POST", name=f"{invoke.path} ({kind})",
            response_time=(event.time - invoke.time) * 1000.0,
            response_length=len(event.body or ""), exception=failure, context={},
        )


class LoadNode:
    """Customers, their recording client and their history, for one Locust process."""

    def __init__(self, plan: LoadPlan, name: str, events: Events) -> None:
        self.plan = plan
        self.name = name
        self.target = plan.load_target()
        self.history = History()
        self.wall_origin = time.time()
        self.history.subscribe(_StatsBridge(events))
        self.client = KeptAliveClient(self.target, self.history, list(plan.urls))
        self._numbers = itertools.count()
        self._charges = gevent.pool.Group()
        self._copies = gevent.pool.Group()  # the copies of double submits, inside a charge
        self._cpu_origin = time.process_time()
        self._shipped = False

    def customer(self) -> Customer:
        number = next(self._numbers)
        tenant = f"t{number % 4}-{self.plan.run_id}" if self.target.tenant is not None else None
        return Customer(process=f"{self.name}u{number}", number=number,
                        run_id=self.plan.run_id, tenant=tenant,
                        rng=random.Random(f"{self.plan.seed}:{self.name}:{number}"),
                        double_submit=self.plan.double_submit, reuse=self.plan.reuse)

    def charge(self, customer: Customer) -> None:
        """One charge to the end of its retries, in a greenlet that outlives a stopped user."""
        self._charges.spawn(customer.charge, self.client, self.plan.policy, self._together).get()

    def _together(self, calls: Sequence[Callable[[], list[Event]]]) -> list[list[Event]]:
        """The calls in greenlets of their own, at once (the copies of a double submit)."""
        greenlets = [self._copies.spawn(call) for call in calls]
        return [greenlet.get() for greenlet in greenlets]

    def ship(self, runner: Runner) -> None:
        """Once: let the charges still running finish, then send the history."""
        if self._shipped:
            return
        self._shipped = True
        self._charges.join(timeout=self.plan.drain_timeout)
        cut = len(self._charges)
        self._charges.kill()
        self._copies.kill()
        self.client.close()
        runner.send_message(HISTORY_MESSAGE, self._payload(cut))

    def _payload(self, cut: int) -> dict[str, Any]:
        origin = self.wall_origin
        return {
            "node": self.name or "local",
            "events": [_wire(e, origin) for e in self.history],
            "cpu_seconds": time.process_time() - self._cpu_origin,
            "charges_cut": cut,
        }

"""What one simulated customer does: charges with fresh keys, each retried with the same key.

A load of clean charges that each get their answer at once never tests idempotency: no key is
ever sent twice.  So, besides the retries the chaos provokes, a share of charges is sent the way
real clients misbehave, whatever the chaos does:

- a double submit (a double click): the same key and body from two connections at once, each
  copy retried to its answer; an atomic claim lets one run and answers the other 409 or with the
  replay, a check-then-insert charges twice;
- a reuse: once the charge has its answer, the same key with another body, which the target must
  refuse (422, or what it promises) without charging.

The retry loop is ``RecordingClient.send_until_answer`` rotating over the instances, so with
several server processes the attempts of one key (and the two copies of a double submit) land on
different processes.  Every attempt is recorded exactly as by every other front end, and the
same checker judges them.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from harness._history import Event
from harness._target import Target, render_template
from harness.http._client import RecordingClient, Request, RetryPolicy

__all__ = ["DOUBLE_SUBMIT", "REUSE", "Customer", "Together"]

DOUBLE_SUBMIT = "double-submit"
REUSE = "reuse"

#: Runs the calls at the same time and returns their results in order (greenlets in a Locust
#: process, threads elsewhere).
Together = Callable[[Sequence[Callable[[], list[Event]]]], list[list[Event]]]


@dataclass
class Customer:
    """One simulated user: its process name in the history, its tenant and its own random
    stream (seeded, so bodies, misbehaviour and backoff repeat for a seed)."""

    process: str
    number: int
    run_id: str
    tenant: str | None
    rng: random.Random
    double_submit: float = 0.0
    reuse: float = 0.0
    charges: int = 0

    def _body(self, target: Target) -> Any:
        values: dict[str, Any] = {
            "amount": self.rng.randint(100, 99_999),
            "nonce": uuid.UUID(int=self.rng.getrandbits(128)).hex,
            "customer": f"cus_{self.process}",
        }
        return render_template(target.endpoint.body, values)

    def next_request(self, target: Target) -> Request:
        """A charge with a fresh key and a fresh body from the target's template."""
        self.charges += 1
        key = f"{self.run_id}-{self.process}-{self.charges:05d}"
        return Request(key=key, tenant=self.tenant, body=self._body(target))

    def other_body(self, target: Target, body: Any) -> Any | None:
        """Another body from the template, or None when the template yields only one."""
        for _ in range(5):
            other = self._body(target)
            if other != body:
                return other
        return None

    def charge(self, client: RecordingClient, policy: RetryPolicy,
               together: Together) -> list[Event]:
        """Make one charge and retry it until it has an answer or the customer gives up; a
        share of charges is double-submitted, another share reuses its key afterwards."""
        request = self.next_request(client.target)
        instance = (self.number + self.charges) % len(client.urls)
        roll = self.rng.random()

        def send(what: Request, process: str, first: int = 1, shift: int = 0) -> list[Event]:
            return client.send_until_answer(
                what, process=process, policy=policy, rng=self.rng, rotate=True,
                first_attempt=first, instance=instance + shift)

        if roll < self.double_submit:
            second = replace(request, label=DOUBLE_SUBMIT)
            both = together([lambda: send(request, self.process),
                             lambda: send(second, f"{self.process}.2", shift=1)])
            return [event for copy in both for event in copy]
        completions = send(request, self.process)
        if roll < self.double_submit + self.reuse and any(e.type == "ok" for e in completions):
            body = self.other_body(client.target, request.body)
            if body is not None:
                reused = replace(request, body=body, label=REUSE)
                completions += send(reused, self.process, first=len(completions) + 1, shift=1)
        return completions

"""What one simulated customer does: charges with fresh keys, each retried with the same key.

The retry loop is ``RecordingClient.send_until_answer`` rotating over the instances, so with
several server processes the attempts of one key land on different processes.  Every attempt is
recorded exactly as by every other front end, and the same checker judges them.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from typing import Any

from harness._client import RecordingClient, Request, RetryPolicy
from harness._history import Event
from harness._target import Target, render_template

__all__ = ["Customer"]


@dataclass
class Customer:
    """One simulated user: its process name in the history, its tenant and its own random
    stream (seeded, so bodies and backoff repeat for a seed)."""

    process: str
    number: int
    run_id: str
    tenant: str | None
    rng: random.Random
    charges: int = 0

    def next_request(self, target: Target) -> Request:
        """A charge with a fresh key and a fresh body from the target's template."""
        self.charges += 1
        key = f"{self.run_id}-{self.process}-{self.charges:05d}"
        values: dict[str, Any] = {
            "amount": self.rng.randint(100, 99_999),
            "nonce": uuid.UUID(int=self.rng.getrandbits(128)).hex,
            "customer": f"cus_{self.process}",
        }
        return Request(key=key, tenant=self.tenant,
                       body=render_template(target.endpoint.body, values))

    def charge(self, client: RecordingClient, policy: RetryPolicy) -> list[Event]:
        """Make one charge and retry it until it has an answer or the customer gives up."""
        request = self.next_request(client.target)
        return client.send_until_answer(
            request, process=self.process, policy=policy, rng=self.rng, rotate=True,
            instance=(self.number + self.charges) % len(client.urls))

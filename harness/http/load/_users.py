"""The Locust user class: a customer that makes one charge after another, with no think time.

The class is made per process and reads that process's ``LoadNode`` when a user starts (a
worker's node exists only once the master has sent the plan); a master's class has no node, since
it only needs the class (its name and weight) to hand users out to workers.
"""

from __future__ import annotations

from collections.abc import Callable

from locust import User, constant, task

from harness.http.load._charges import Customer
from harness.http.load._node import LoadNode

__all__ = ["charge_user_class"]


def charge_user_class(node_of: Callable[[], LoadNode | None]) -> type[User]:
    class ChargeUser(User):
        """Charges with fresh keys until the run stops; each charge retried to an answer."""

        wait_time = constant(0)
        customer: Customer
        node: LoadNode

        def on_start(self) -> None:
            node = node_of()
            if node is None:
                raise RuntimeError("a ChargeUser runs only in a process with a LoadNode")
            self.node = node
            self.customer = node.customer()

        @task
        def charge(self) -> None:
            self.node.charge(self.customer)

    return ChargeUser

"""The Locust user class: a customer that makes one charge after another, with no think time.

The class is made per process and bound to that process's ``LoadNode``; a master builds it with
no node, since it only needs the class (its name and weight) to hand users out to workers.
"""

from __future__ import annotations

from locust import User, constant, task

from harness.load._charges import Customer
from harness.load._node import LoadNode

__all__ = ["charge_user_class"]


def charge_user_class(node: LoadNode | None) -> type[User]:
    class ChargeUser(User):
        """Charges with fresh keys until the run stops; each charge retried to an answer."""

        wait_time = constant(0)
        customer: Customer

        def on_start(self) -> None:
            if node is None:
                raise RuntimeError("a ChargeUser runs only in a process with a LoadNode")
            self.customer = node.customer()

        @task
        def charge(self) -> None:
            assert node is not None
            node.charge(self.customer)

    return ChargeUser

"""Rules by weight: how a front end's operations become a Hypothesis state machine's rules.

Hypothesis picks evenly among the rules that may run, and switches a random part of them off
for each example (swarm testing).  An even pick would make a new request (or a publish) as rare
as a crash, so each operation is registered as many times as its weight: a rule registered
four times is picked four times as often, and is hardly ever switched off entirely.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

__all__ = ["Operation", "weighted"]

#: ``rule`` with only value strategies (its overloads for bundles do not take a mapping).
_rule = cast(Callable[..., Callable[[Callable[..., None]], Callable[..., None]]], rule)


@dataclass(frozen=True)
class Operation:
    """What an operation draws, and when it may run (``condition`` on the machine)."""

    strategies: Mapping[str, st.SearchStrategy[Any]]
    condition: Callable[[Any], bool] | None = None


def weighted(base: type[RuleBasedStateMachine], name: str, operation: Operation,
             weight: int) -> dict[str, Any]:
    """``weight`` rules that all perform ``base``'s method ``name`` (the first one under that
    name, the others ``name_2``...), for the namespace of a subclass of ``base``."""
    rules: dict[str, Any] = {}
    for copy in range(weight):
        def perform(self: RuleBasedStateMachine, _name: str = name, **values: Any) -> None:
            getattr(base, _name)(self, **values)

        perform.__name__ = perform.__qualname__ = name if copy == 0 else f"{name}_{copy + 1}"
        registered = _rule(**operation.strategies)(perform)
        if operation.condition is not None:
            registered = precondition(operation.condition)(registered)
        rules[perform.__name__] = registered
    return rules

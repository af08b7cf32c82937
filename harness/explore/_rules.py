"""Rules by weight and in order: how a front end's operations become a state machine's rules.

Hypothesis picks evenly among the rules that may run, and switches a random part of them off
for each example (swarm testing).  An even pick would make a new request (or a publish) as rare
as a crash, so each operation is registered as many times as its weight: a rule registered
four times is picked four times as often, and is hardly ever switched off entirely.

Hypothesis also has a favourite: the first rule in its order.  Its simplest example repeats that
rule at every step, its early examples repeat it after a few drawn steps (its fast path for a
flaw that is easy to find), and shrinking moves every step towards it.  Hypothesis orders rules
by their number of arguments, then by name; here each rule's name begins with its operation's
place in the front end's weights, so among rules that draw as many values the front end chooses
the order, and the favourite is the first operation of the fewest values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

__all__ = ["Operation", "rules"]

#: ``rule`` with only value strategies (its overloads for bundles do not take a mapping).
_rule = cast(Callable[..., Callable[[Callable[..., None]], Callable[..., None]]], rule)


@dataclass(frozen=True)
class Operation:
    """What an operation draws, and when it may run (``condition`` on the machine)."""

    strategies: Mapping[str, st.SearchStrategy[Any]]
    condition: Callable[[Any], bool] | None = None


def rules(base: type[RuleBasedStateMachine], operations: Mapping[str, Operation],
          weights: Mapping[str, int]) -> dict[str, Any]:
    """The rules that perform ``base``'s methods named in ``operations``, for the namespace of
    a subclass of ``base``: each as many times as ``weights`` says, in the order of
    ``weights`` (the first one is Hypothesis's favourite)."""
    places = {name: place for place, name in enumerate(weights)}
    namespace: dict[str, Any] = {}
    for name, operation in operations.items():
        namespace.update(_weighted(base, name, operation, weights[name], places[name]))
    return namespace


def _weighted(base: type[RuleBasedStateMachine], name: str, operation: Operation, weight: int,
              place: int) -> dict[str, Any]:
    """``weight`` rules that all perform ``base``'s method ``name``, named so that they sort
    at ``place`` (``r03_name``, ``r03_name_2``...)."""
    registered_rules: dict[str, Any] = {}
    for copy in range(weight):
        def perform(self: RuleBasedStateMachine, _name: str = name, **values: Any) -> None:
            getattr(base, _name)(self, **values)

        rule_name = f"r{place:02d}_{name}" + ("" if copy == 0 else f"_{copy + 1}")
        perform.__name__ = perform.__qualname__ = rule_name
        registered = _rule(**operation.strategies)(perform)
        if operation.condition is not None:
            registered = precondition(operation.condition)(registered)
        registered_rules[rule_name] = registered
    return registered_rules

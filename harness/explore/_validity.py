"""What every front end's check of a story's order shares: a fault healed must be on.

A replay may aim a story at another target, and the last pass of shrinking drops steps: either
can leave a step that heals a fault no earlier step switched on.  Each front end says what else
keeps its actions from running (``harness/http/explore/_validity.py``,
``harness/consumer/explore/_validity.py``); both switch faults with ``toggled``.
"""

from __future__ import annotations

from harness.explore._actions import FaultOff, FaultOn

__all__ = ["toggled"]


def toggled(action: FaultOn | FaultOff, faults_on: set[str], where: str) -> list[str]:
    """Switch ``action``'s fault on or off in ``faults_on``; healing one that is not on is a
    problem (a dropped step can leave it so)."""
    if isinstance(action, FaultOn):
        faults_on.add(action.fault)
    elif action.fault not in faults_on:
        return [f"{where} heals a fault that is not on"]
    else:
        faults_on.discard(action.fault)
    return []

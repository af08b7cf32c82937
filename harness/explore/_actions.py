"""The actions every front end's stories share, as plain data: a fault on and off, a clock jump.

A story is a list of actions (pydantic models, so that a saved story reads back exactly as it
ran); each front end has its own (an HTTP service's ``harness/http/explore/_actions.py``, a
queue consumer's ``harness/consumer/explore/_actions.py``), and both switch their faults on and
off and move the clock with these.  ``ActionModel`` is what every action is.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ActionModel", "Clock", "FaultOff", "FaultOn"]


class ActionModel(BaseModel):
    """A story's action: frozen plain data with no field it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class FaultOn(ActionModel):
    """A network fault from ``harness.FAULTS`` switched on until a later ``heal``."""

    op: Literal["fault"] = "fault"
    fault: str

    def text(self) -> str:
        return f"state.fault({self.fault!r})"


class FaultOff(ActionModel):
    op: Literal["heal"] = "heal"
    fault: str

    def text(self) -> str:
        return f"state.heal({self.fault!r})"


class Clock(ActionModel):
    """The target's clock moved forward; ``why`` says where that lands (past the lease...).
    After a jump the target's cleanup job runs (its hook, if it has one), unless ``cleanup``
    is false: then an expired key is still in its table, as it is between two runs of a real
    cron job."""

    op: Literal["clock"] = "clock"
    seconds: float = Field(gt=0)
    why: str = ""
    cleanup: bool = True

    def text(self) -> str:
        note = f"  # {self.why}" if self.why else ""
        if not self.cleanup:
            note = f"{note or '  #'}, before the cleanup job runs"
        return f"state.advance_clock({self.seconds:g}){note}"

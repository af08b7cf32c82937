"""A named fault: the one vocabulary of network faults that every front end's nemesis speaks.

A fault is a Toxiproxy toxic on one stream of a proxy, or the proxy switched off, with a name a
scenario, a story and a report use, and the words a page shows for it.  Each front end names
its own (an HTTP service's client and store links, ``harness/http/_nemesis.py``; a consumer's
broker connection, ``harness/consumer/_nemesis.py``) and applies them its own way; the history
records what ``describe`` says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from harness.services._toxiproxy import Toxic

__all__ = ["Fault", "Where"]

Where = Literal["client", "store"]


@dataclass(frozen=True, slots=True)
class Fault:
    """A named network fault: a toxic, or the proxy switched off."""

    name: str
    summary: str
    toxic: Toxic | None = None
    where: Where = "client"
    meaning: dict[str, str] = field(default_factory=dict)

    @property
    def proxy_down(self) -> bool:
        return self.toxic is None

    def describe(self) -> dict[str, object]:
        data: dict[str, object] = {"fault": self.name, "where": self.where}
        if self.toxic is not None:
            data.update(toxic=self.toxic.type, stream=self.toxic.stream,
                        attributes=dict(self.toxic.attributes))
        return data

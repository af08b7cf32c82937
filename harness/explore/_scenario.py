"""The explorer as a run sees it: one scenario, ``explore``, with every property.

Its steps are drawn one at a time by Hypothesis, so it cannot run from the scenario catalog;
the context a world drives needs a scenario all the same, and the report names its outcome.
"""

from __future__ import annotations

from harness._errors import UsageError
from harness._scenario import Scenario
from harness.judging._checker import PROPERTIES

__all__ = ["EXPLORER"]


def _drawn_step_by_step(context: object) -> None:
    raise UsageError("the explorer's steps are drawn one at a time by Hypothesis; run it with "
                     "`idem-harness explore`, or replay a saved story with `idem-harness replay`")


EXPLORER = Scenario(
    name="explore",
    summary="random interleavings of requests, retries and faults, shrunk to the shortest "
            "failing story",
    story=(
        "The scenarios check what we thought of; the explorer looks for what we did not. "
        "Hypothesis draws stories of new requests, retries, reused keys, bursts, requests "
        "without a key, network faults, clock jumps and crashes; the checker judges the "
        "history after every step, and a failing story is shrunk to its shortest form."
    ),
    properties=tuple(PROPERTIES.ids()),
    plan=("draw the next operation or fault", "perform it through the recording client and "
          "the nemesis", "collect the side effects of every key used and run the checker"),
    run=_drawn_step_by_step,
)

"""The explorer for queue consumers: Hypothesis draws stories of publishes, copies, republishes
under a new message id, lost acks, cut and stalled connections, kills and restarts, clock jumps,
poison messages and failing jobs against a consumer on a real RabbitMQ; the same checker judges
the same history after every step and once the queue has settled, and a failing story is
shrunk, printed, saved and replayed as an HTTP one is (docs/consumers.md, "Exploring a
consumer").  Only what differs from an HTTP service lives here: the actions, the planner, the
machine, the world, the session and the front end; the rest is ``harness.explore``'s.
"""

from harness.explore.consumer._actions import ConsumerAction
from harness.explore.consumer._front import CONSUMER, ConsumerFront

__all__ = ["CONSUMER", "ConsumerAction", "ConsumerFront"]

"""The explorer for queue consumers: what differs from exploring an HTTP service.

Hypothesis draws stories of publishes, copies, republishes under a new message id, lost acks,
cut and stalled connections, kills and restarts, clock jumps, poison messages and failing jobs
against a consumer on a real RabbitMQ; the same checker judges the same history after every
step and once the queue has settled, and a failing story is shrunk, printed, saved and replayed
as an HTTP one is (docs/consumers.md, "Exploring a consumer").  Only what differs from an HTTP
service lives here: the actions, the planner, the machine, the world, the session and the
``Explorer`` (``_front.py``) the consumer's front end hands the engine; the rest is
``harness.explore``'s.  The package re-exports nothing.
"""

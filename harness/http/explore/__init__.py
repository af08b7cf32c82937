"""The explorer's part of the HTTP front end: an HTTP service's stories of requests and faults.

Hypothesis draws stories of new requests, retries, reused keys, bursts, requests without a key,
bad bodies, network faults, clock jumps, crashes and slowed requests; the engine's explorer
(``harness/explore/``) judges, shrinks, saves and replays them.  Only what is an HTTP
service's lives here: the actions, the strategies and planner, the machine, the world that
performs a story through ``ScenarioContext``, the session, and the ``Explorer`` (``_front.py``)
the HTTP front end hands the engine.  The package re-exports nothing.
"""

"""Load under chaos: Locust users making charges through Toxiproxy while faults come and go.

Two kinds of process take part, and the line between them is the point of this package.

- The load command's process (this package's public surface, ``harness.cli``): it starts the
  target and Toxiproxy, runs the chaos schedule through the nemesis, then merges the histories,
  asks the oracle about every key and judges P1, P2, P4 and P5.  It never imports Locust.
- Locust processes (a local runner, or a master and its workers): they import ``locust`` before
  anything else, because Locust's gevent patching ends in a ``RecursionError`` inside ``ssl`` when
  ``ssl`` is already loaded, and httpx, requests and toxiproxy-python (so ``harness`` itself) load
  it.  They are started as ``python -c`` with a bootstrap that imports ``locust`` first
  (``_launch.py``, ``_process.py``), and exchange only files and Locust's own messages with
  the load command: the plan goes in, histories and Locust's reports come out.

The Locust side is ``_process``, ``_roles``, ``_node``, ``_users`` and ``_outputs``; nothing
here or in ``harness.cli`` imports them.  The modules both sides use (``_plan``, ``_charges``)
import only the engine.
"""

from harness.http.load._chaos import ChaosRunner
from harness.http.load._report import load_summary, render_load_json, write_load_report
from harness.http.load._run import LOAD_PROPERTIES, LoadConfig, LoadResult, run_load
from harness.http.load._schedule import CHAOS_PROFILES, Window, chaos_schedule

__all__ = [
    "CHAOS_PROFILES",
    "LOAD_PROPERTIES",
    "ChaosRunner",
    "LoadConfig",
    "LoadResult",
    "Window",
    "chaos_schedule",
    "load_summary",
    "render_load_json",
    "run_load",
    "write_load_report",
]

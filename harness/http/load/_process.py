"""The entry point of a Locust process: ``harness.http.load`` starts it, never a person.

Importing ``locust`` patches the standard library through gevent, and if anything imported
``ssl`` before that (httpx, requests and toxiproxy-python all do, and ``harness/__init__.py``
imports them), the patched ``ssl`` ends in a ``RecursionError``.  So this module cannot be run
with ``python -m``: that would import the ``harness`` package first.  ``harness.http.load._launch``
starts ``python -c`` with a bootstrap whose first statement is ``import locust``; only then does
it import this module and call ``main``, which refuses to go on if that order was not kept.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from harness.http.load._plan import CONNECT_TIMEOUT, LoadPlan

__all__ = ["ROLES", "main"]

ROLES = ("local", "master", "worker")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness.http.load._process", description=__doc__)
    parser.add_argument("--role", choices=ROLES, required=True)
    parser.add_argument("--plan", type=Path, help="the load plan (JSON; local and master)")
    parser.add_argument("--master", help="HOST:PORT of the master (worker; it sends the plan)")
    parser.add_argument("--connect-timeout", type=float, default=CONNECT_TIMEOUT,
                        help="seconds a worker waits for its master to answer")
    return parser


def main(argv: list[str] | None = None) -> int:
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        print("error: a Locust process must import locust before anything else; start it "
              "through `idem-harness load` (see harness/http/load/_process.py)", file=sys.stderr)
        return 2
    from harness.http.load._roles import run_stats, run_worker

    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    for chatty in ("httpx", "httpcore"):  # a line per request costs more CPU than the request
        logging.getLogger(chatty).setLevel(logging.WARNING)
    if args.role == "worker":
        host, _, port = str(args.master or "").rpartition(":")
        if not host or not port.isdigit():
            print("error: a worker needs --master HOST:PORT", file=sys.stderr)
            return 2
        return run_worker(host.strip("[]"), int(port), connect_timeout=args.connect_timeout)
    if args.plan is None:
        print(f"error: a {args.role} process needs --plan", file=sys.stderr)
        return 2
    return run_stats(LoadPlan.read(args.plan))

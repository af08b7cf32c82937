"""``idem-harness load``: parse, choose the target, then call ``run_load``.

Several reference server processes need one store they all see.  Without ``--store`` the command
starts a throwaway PostgreSQL (``IDEM_PG_DSN`` or the local binaries, as everywhere in the
harness) and removes it afterwards, so ``--servers 2`` works with nothing else given.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path

import click
from psycopg.conninfo import conninfo_to_dict
from rich.console import Console

from harness._errors import UsageError
from harness.cli._common import DURATION, REPORT_DIR, default_report_dir, translate_errors
from harness.cli._run import choose_target, target_options
from harness.http.load import CHAOS_PROFILES, LoadConfig, load_summary, run_load, write_load_report
from harness.http.load._launch import run_worker_process
from harness.http.load._plan import CONNECT_TIMEOUT
from harness.services._postgres import start_postgres
from harness.targets._reference import reference_target

__all__ = ["load"]

LOAD_DATABASE = "idem_load"


def _database_of(dsn: str) -> str:
    """``NAME at HOST:PORT`` of a PostgreSQL URL, without its credentials."""
    info = conninfo_to_dict(dsn)
    return f"{info.get('dbname')} at {info.get('host')}:{info.get('port') or 5432}"


@click.command()
@target_options
@click.option("--servers", type=click.IntRange(1, 16), default=1, show_default=True,
              help="target processes, each behind its own proxy; retries of a key rotate over "
                   "them (the reference server shares a PostgreSQL: --store, or a throwaway one)")
@click.option("--users", type=click.IntRange(min=1),
              help="simulated customers, each making charges one after another (required)")
@click.option("--spawn-rate", type=click.FloatRange(min=0, min_open=True),
              help="users started per second (required)")
@click.option("--duration", type=DURATION, help="how long users start charges: 60s (required)")
@click.option("--chaos", type=click.Choice(list(CHAOS_PROFILES)), default="none",
              show_default=True,
              help="; ".join(f"{name}: {what}" for name, what in CHAOS_PROFILES.items()))
@click.option("--workers", type=click.IntRange(0, 64), default=0, show_default=True,
              help="Locust worker processes under a master (0: one local process); with "
                   "--listen, the workers started on other machines")
@click.option("--listen", metavar="HOST:PORT", default=None,
              help="the master listens here for workers on other machines (each started with "
                   "`load --worker --master HOST:PORT`); a non-loopback HOST needs "
                   "--allow-remote")
@click.option("--worker", is_flag=True,
              help="be a Locust worker for the master at --master: it sends the plan")
@click.option("--master", metavar="HOST:PORT", default=None,
              help="with --worker: the master's address, as it printed it")
@click.option("--connect-timeout", type=DURATION, default=None, metavar="DURATION",
              help="with --worker: how long to wait for the master to answer, then exit 2  "
                   "[default: 60s]")
@click.option("--request-timeout", type=DURATION, default="2s", show_default=True,
              help="how long a client waits for one attempt before it retries")
@click.option("--report-dir", type=REPORT_DIR, default=None,
              help="where to write load.json, results.json, junit.xml, history.jsonl and "
                   "Locust's CSV and HTML (default reports/run-*)")
@click.option("--seed", type=int, default=None,
              help="seed for the chaos schedule and the request bodies")
@translate_errors
def load(target_file: str | None, reference: bool, store: str | None, flaw: tuple[str, ...],
         allow_remote: bool, servers: int, users: int | None, spawn_rate: float | None,
         duration: float | None, chaos: str, workers: int, listen: str | None, worker: bool,
         master: str | None, connect_timeout: float | None, request_timeout: float,
         report_dir: Path | None, seed: int | None) -> None:
    """Drive Locust users against a target under chaos, then judge P1, P2, P4 and P5 over
    every key (exit 0 pass, 1 findings, 2 error, 3 inconclusive); or, with --worker, be a
    worker for a master on another machine."""
    if worker or master:
        given = [name for name, value in (
            ("--target", target_file), ("--reference", reference), ("--store", store),
            ("--flaw", flaw), ("--users", users), ("--spawn-rate", spawn_rate),
            ("--duration", duration), ("--listen", listen), ("--report-dir", report_dir),
            ("--seed", seed)) if value]
        if not (worker and master) or given:
            raise UsageError("a worker takes everything from its master's plan: give "
                             "--worker --master HOST:PORT (and --allow-remote for another "
                             "machine)" + (f", not {', '.join(given)}" if given else ""))
        sys.exit(run_worker_process(master, allow_remote=allow_remote,
                                    connect_timeout=connect_timeout or CONNECT_TIMEOUT))
    if connect_timeout is not None:
        raise UsageError("--connect-timeout is how long a worker (--worker) waits for its "
                         "master; the master waits for its workers on its own")
    missing = [name for name, value in (("--users", users), ("--spawn-rate", spawn_rate),
                                        ("--duration", duration)) if value is None]
    if missing:
        raise UsageError(f"give {', '.join(missing)} (for example --users 20 --spawn-rate 10 "
                         "--duration 60s)")
    assert users is not None and spawn_rate is not None and duration is not None
    target = choose_target(target_file, reference, store, flaw)
    report_dir = report_dir or default_report_dir()
    console = Console(stderr=True)
    with ExitStack() as stack:
        if reference and servers > 1:
            if store is None:
                server = stack.enter_context(start_postgres())
                store = server.create_database(LOAD_DATABASE)
                console.print(f"{servers} reference servers share the PostgreSQL database "
                              f"{_database_of(store)} (made for this run, dropped at its end)")
            target = reference_target(store=store, flaw=flaw, servers=servers)
        config = LoadConfig(
            target=target, users=users, spawn_rate=spawn_rate, duration=duration,
            report_dir=report_dir, chaos=chaos, servers=servers, workers=workers, seed=seed,
            request_timeout=request_timeout, allow_remote=allow_remote, listen=listen,
        )
        result = run_load(config, progress=lambda line: console.print(line, highlight=False,
                                                                      soft_wrap=True))
    write_load_report(result, report_dir)
    # Commands are never wrapped (a broken curl line cannot be pasted); the terminal folds them.
    console.print(load_summary(result), soft_wrap=True)
    sys.exit(result.exit_code)

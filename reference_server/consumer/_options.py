"""What the reference consumer's two commands share: the worker's options and their checks.

``consume`` (RabbitMQ) and ``consume-kafka`` run the same worker, with the same store, dedup
window, retries, admin routes, test hooks and flaws; only how each reaches its broker differs.
``worker_options`` adds the shared options to a command (``thing`` names what the broker
carries: a message, a record), and ``worker_settings`` checks their values and turns them into
``ConsumerSettings`` fields, so that each command parses only its broker's own options.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from reference_server._durations import Duration
from reference_server._options import checked_flaws
from reference_server.stores import StoreUrlError, check_store_url

__all__ = ["LOG_LEVELS", "default_store", "worker_options", "worker_settings"]

LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]

F = TypeVar("F", bound=Callable[..., Any])


def default_store() -> str:
    from harness.services._paths import state_dir

    return f"sqlite:///{state_dir() / 'reference-consumer.sqlite3'}"


def worker_options(*, thing: str, flaw_names: Sequence[str],
                   combine: Callable[[Sequence[str]], object],
                   helps: dict[str, str] | None = None) -> Callable[[F], F]:
    """The options of the worker both commands run, after the command's own; ``helps`` gives
    an option its broker's own words (``--max-attempts``...)."""
    said = {
        "--max-attempts": f"Deliveries of a {thing} without an outcome before it is "
                          "dead-lettered.",
        "--requeue-delay": "Wait before a requeue, and between looks at a key another consumer "
                           "holds.",
        "--connect-timeout": "How long to retry the first connection to the broker before "
                             "exiting 3.",
        "--dedup-header": f"The {thing} header holding the client's dedup key.",
        **(helps or {}),
    }
    options = [
        click.option("--allow-remote", is_flag=True, help="Allow a non-loopback broker."),
        click.option("--store", "store_url", metavar="URL",
                     help="sqlite:///ABSOLUTE/PATH or postgresql://USER@HOST:PORT/DB, the same "
                          "ledger the HTTP server writes [default: reference-consumer.sqlite3 "
                          "in the state directory]"),
        click.option("--dedup-header", default="Idempotency-Key", show_default=True,
                     help=said["--dedup-header"]),
        click.option("--lease", type=Duration(), default="30s", show_default=True,
                     help="How long a claim holds a key before another consumer may take it "
                          "over."),
        click.option("--retention", type=Duration(), default="24h", show_default=True,
                     help="The dedup window: how long a finished key is remembered."),
        click.option("--max-attempts", type=click.IntRange(1, 1000), default=5,
                     show_default=True, help=said["--max-attempts"]),
        click.option("--requeue-delay", type=Duration(), default="250ms", show_default=True,
                     help=said["--requeue-delay"]),
        click.option("--cleanup-interval", type=Duration(), default="60s", show_default=True,
                     help="How often expired keys are deleted."),
        click.option("--work-delay-ms", type=click.IntRange(0, 600_000), default=0,
                     show_default=True, help="Simulated payment-provider latency inside each "
                                             "job."),
        click.option("--connect-timeout", type=Duration(), default="15s", show_default=True,
                     help=said["--connect-timeout"]),
        click.option("--admin-port", type=click.IntRange(1, 65535),
                     help="Serve the admin routes (/_admin/health, effects, keys, cleanup, "
                          "events, clock) on this loopback port."),
        click.option("--test-clock", is_flag=True,
                     help="Let POST /_admin/clock/advance move the consumer's clock."),
        click.option("--test-faults", is_flag=True,
                     help=f"Honour the X-Test-Pause and X-Test-Fault {thing} headers."),
        click.option("--flaw", "flaws", metavar="NAME", multiple=True,
                     callback=checked_flaws(combine),
                     help=f"Run with a named flaw (repeat for several): "
                          f"{', '.join(flaw_names)}."),
        click.option("--log-level", type=click.Choice(LOG_LEVELS), default="info",
                     show_default=True),
    ]

    def add(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return add


def worker_settings(*, store_url: str | None, dedup_header: str, lease: float,
                    retention: float, max_attempts: int, requeue_delay: float,
                    cleanup_interval: float, work_delay_ms: int, connect_timeout: float,
                    admin_port: int | None, test_clock: bool, test_faults: bool,
                    flaws: tuple[str, ...], log_level: str) -> dict[str, Any]:
    """The shared options' values checked (a usage error naming the option and what it takes)
    and as ``ConsumerSettings`` fields (``--allow-remote`` is the command's to use, on its
    broker's address)."""
    if not dedup_header.strip() or not dedup_header.isascii():
        raise click.BadParameter("name an ASCII header, such as Idempotency-Key",
                                 param_hint="--dedup-header")
    url = store_url or default_store()
    try:
        check_store_url(url)
    except StoreUrlError as exc:
        raise click.BadParameter(str(exc), param_hint="--store") from exc
    return {"store_url": url, "dedup_header": dedup_header.strip(), "lease": lease,
            "retention": retention, "max_attempts": max_attempts,
            "requeue_delay": requeue_delay, "cleanup_interval": cleanup_interval,
            "work_delay": work_delay_ms / 1000, "connect_timeout": connect_timeout,
            "admin_port": admin_port, "test_clock": test_clock, "test_faults": test_faults,
            "flaws": flaws, "log_level": log_level}

"""``python -m reference_server`` and ``idem-harness serve``: one click command, ``serve``.

The command only parses and checks options, then hands a ``ServerSettings`` to the runner; a
bad value is a usage error naming the option and the accepted forms, before anything starts.
"""

from __future__ import annotations

from typing import cast

import click

from harness.services._network import is_loopback
from reference_server._durations import Duration
from reference_server._middleware import ErrorPolicy, InProgressPolicy, Mode
from reference_server._options import checked_flaws
from reference_server._serving import run_server
from reference_server._settings import ServerSettings
from reference_server.flaws import FLAWS, flaws_named
from reference_server.stores import StoreUrlError, check_store_url

__all__ = ["serve"]

_LOG_LEVELS = ["critical", "error", "warning", "info", "debug"]


def _default_store() -> str:
    # Imported here: the harness package is slow to import, and only this default needs it.
    from harness.services._paths import state_dir

    return f"sqlite:///{state_dir() / 'reference-server.sqlite3'}"


@click.command(name="serve", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; loopback only unless --allow-remote.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--allow-remote", is_flag=True,
              help="Allow a non-loopback --host (the admin endpoints stay loopback-only).")
@click.option("--store", "store_url", metavar="URL",
              help="sqlite:///ABSOLUTE/PATH or postgresql://USER@HOST:PORT/DB "
                   "[default: reference-server.sqlite3 in the state directory]")
@click.option("--mode", type=click.Choice(["strict", "lax"]), default="strict",
              show_default=True, help="strict: 400 without a key; lax: run it unprotected.")
@click.option("--in-progress", type=click.Choice(["conflict", "wait"]), default="conflict",
              show_default=True, help="Answer a retry of a running request with 409, or wait.")
@click.option("--wait-timeout", type=Duration(), default="5s", show_default=True,
              help="How long --in-progress wait waits before answering 409.")
@click.option("--max-waiters", type=click.IntRange(min=0), default=64, show_default=True,
              help="Requests allowed to wait at once; more get 409 at once.")
@click.option("--lease", type=Duration(), default="30s", show_default=True,
              help="How long a claim holds a key before a retry may take it over.")
@click.option("--retention", type=Duration(), default="24h", show_default=True,
              help="How long a completed key is replayed.")
@click.option("--cleanup-interval", type=Duration(), default="60s", show_default=True,
              help="How often expired keys are deleted.")
@click.option("--work-delay-ms", type=click.IntRange(0, 600_000), default=0, show_default=True,
              help="Simulated payment-provider latency inside the charge handler.")
@click.option("--errors", type=click.Choice(["release", "store"]), default="release",
              show_default=True,
              help="A raising handler: release the key (retry runs again) or store its 500.")
@click.option("--test-clock", is_flag=True,
              help="Let POST /_admin/clock/advance move the server's clock.")
@click.option("--test-faults", is_flag=True,
              help="Honour the X-Test-Fault and X-Test-Delay-Ms request headers.")
@click.option("--flaw", "flaws", metavar="NAME", multiple=True,
              callback=checked_flaws(flaws_named),
              help=f"Run with a named flaw (repeat for several): {', '.join(FLAWS)}.")
@click.option("--header-timeout", type=Duration(), default="10s", show_default=True,
              help="How long a client may take to send a request's headers; then 408.")
@click.option("--body-timeout", type=Duration(), default="30s", show_default=True,
              help="How long a client may take to send a request's body; then 408.")
@click.option("--log-level", type=click.Choice(_LOG_LEVELS), default="info", show_default=True)
@click.option("--no-idempotency", is_flag=True, hidden=True,
              help="Serve the handler bare (to measure the layer's cost).")
def serve(
    host: str, port: int, allow_remote: bool, store_url: str | None, mode: str,
    in_progress: str, wait_timeout: float, max_waiters: int, lease: float, retention: float,
    cleanup_interval: float, work_delay_ms: int, errors: str, test_clock: bool,
    test_faults: bool, flaws: tuple[str, ...], header_timeout: float, body_timeout: float,
    log_level: str, no_idempotency: bool,
) -> None:
    """Run the reference server: POST /charges behind a complete idempotency-key layer."""
    if not allow_remote and not is_loopback(host):
        raise click.BadParameter(
            f"{host} is not a loopback address; pass --allow-remote to listen on it",
            param_hint="--host",
        )
    url = store_url or _default_store()
    try:
        check_store_url(url)
    except StoreUrlError as exc:
        raise click.BadParameter(str(exc), param_hint="--store") from exc
    settings = ServerSettings(
        store_url=url,
        host=host,
        port=port,
        mode=cast(Mode, mode),
        in_progress=cast(InProgressPolicy, in_progress),
        wait_timeout=wait_timeout,
        max_waiters=max_waiters,
        lease=lease,
        retention=retention,
        cleanup_interval=cleanup_interval,
        work_delay=work_delay_ms / 1000,
        errors=cast(ErrorPolicy, errors),
        test_clock=test_clock,
        test_faults=test_faults,
        flaws=flaws,
        idempotency=not no_idempotency,
        log_level=log_level,
        header_timeout=header_timeout,
        body_timeout=body_timeout,
    )
    run_server(settings)

"""Everything a reference server process is told at start, in one frozen value.

The CLI fills it from options; ``create_app`` and tests build it directly.  Times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference_server._deadlines import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT
from reference_server._middleware import ErrorPolicy, InProgressPolicy, Mode

__all__ = ["ServerSettings"]


@dataclass(frozen=True, slots=True)
class ServerSettings:
    store_url: str
    host: str = "127.0.0.1"
    port: int = 8000
    mode: Mode = "strict"
    in_progress: InProgressPolicy = "conflict"
    wait_timeout: float = 5.0
    max_waiters: int = 64
    lease: float = 30.0
    retention: float = 86400.0
    cleanup_interval: float = 60.0
    work_delay: float = 0.0
    errors: ErrorPolicy = "release"
    test_clock: bool = False
    test_faults: bool = False
    flaws: tuple[str, ...] = ()  # named flaws switched on together (``flaws.combine``)
    idempotency: bool = True  # off only to measure the layer's cost (bench/)
    log_level: str = "info"
    #: How long a client may take to send a request's headers, then its body (``_deadlines``).
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT

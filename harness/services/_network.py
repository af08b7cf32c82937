"""Loopback guard and free ports.

The harness injects faults and floods targets with retries, so by default it must only ever
talk to this machine.  Every address it is about to use passes through ``require_loopback``.
"""

from __future__ import annotations

import functools
import ipaddress
import random
import socket
from pathlib import Path
from urllib.parse import urlsplit

from harness._errors import RemoteTargetRefused, UsageError

__all__ = ["free_port", "host_of", "is_loopback", "require_loopback"]

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
#: Listening ports are chosen from here up to the start of the kernel's ephemeral range.
_FIRST_PORT = 10_000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_choose = random.SystemRandom()  # never the seeded global generator: processes would agree


def is_loopback(host: str) -> bool:
    """True when ``host`` is a loopback address literal or a name that always means loopback.

    Other names are not resolved: a DNS answer can change between the check and the connection.
    """
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_of(address: str) -> str:
    """The host part of a URL (``http://h:1/x``, ``postgresql://u@h/db``) or of ``host:port``."""
    if "://" in address:
        host = urlsplit(address).hostname
        if not host:
            raise UsageError(f"{address!r} has no host; write it as scheme://127.0.0.1:PORT/...")
        return host
    if address.startswith("["):
        return address[1 : address.index("]")]
    return address.rsplit(":", 1)[0] if address.count(":") == 1 else address


def require_loopback(address: str, *, allow_remote: bool = False) -> None:
    """Raise ``RemoteTargetRefused`` unless ``address`` is loopback or the user opted in."""
    if not allow_remote and not is_loopback(host_of(address)):
        raise RemoteTargetRefused(address)


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` different ports that were free a moment ago (``free_port`` picks at random,
    so two picks may agree: a service that listens on several, a Kafka broker's listeners,
    refuses to start on one port twice)."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port(host)
        if port not in ports:
            ports.append(port)
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago, for a service about to listen on it.

    Chosen below the kernel's ephemeral range: a port the kernel picks (a bind to port 0) comes
    from the range it also hands to outgoing connections, and one of those (a client of another
    test, Toxiproxy's upstream) could take it before the service binds it (seen in CI).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(100):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, _choose.randrange(_FIRST_PORT, _ephemeral_start())))
            except OSError:  # taken: another
                continue
            port: int = sock.getsockname()[1]
            return port
    with socket.socket(family, socket.SOCK_STREAM) as sock:  # a crowded range: the kernel's
        sock.bind((host, 0))
        port = sock.getsockname()[1]
        return port


def listening(host: str, port: int) -> bool:
    """Whether something accepts connections at ``host``:``port`` now."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def port_taken(host: str, port: int) -> bool:
    """Whether another socket holds ``port`` on ``host`` now."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


@functools.cache
def _ephemeral_start() -> int:
    """Where the kernel's ephemeral ports begin (Linux's default when it cannot be read)."""
    try:
        start = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        start = 32768
    return max(start, _FIRST_PORT + 1000)

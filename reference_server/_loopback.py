"""Is an address this machine?  For ``--host`` and for the admin door.

The same rule as ``harness._network.is_loopback`` (literals and the names that always mean
loopback; nothing is resolved), kept here because importing the harness package would add most
of a second to every server start, and the harness starts many servers.
"""

from __future__ import annotations

import ipaddress

__all__ = ["is_loopback"]

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

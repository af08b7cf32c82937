"""Free ports for services the harness starts: below the kernel's ephemeral range, so that no
outgoing connection can take one between the choice and the service's bind."""

from __future__ import annotations

import socket
from pathlib import Path

from harness.services._network import free_port


def test_a_free_port_is_below_the_ports_outgoing_connections_use() -> None:
    ephemeral_start = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(port < ephemeral_start for port in ports), ports
    for port in ports:  # and free to listen on
        with socket.create_server(("127.0.0.1", port)):
            pass


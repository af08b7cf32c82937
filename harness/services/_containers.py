"""The testcontainers fallback, for machines with a Docker engine and no local binaries.

Kept deliberately thin: it is the third choice after an address in the environment and a local
binary, and most machines that run the harness (including its CI) have no Docker engine.
"""

from __future__ import annotations

from typing import Any

__all__ = ["docker_answers", "postgres_container", "toxiproxy_container"]

TOXIPROXY_IMAGE = "ghcr.io/shopify/toxiproxy:2.12.0"
POSTGRES_IMAGE = "postgres:16-alpine"


def docker_answers() -> bool:
    """True when a Docker engine answers a ping within two seconds."""
    try:
        import docker

        client = docker.from_env(timeout=2)
        client.ping()
        client.close()
    except Exception:  # no socket, no permission, no engine: all mean "no"
        return False
    return True


def toxiproxy_container(api_port: int) -> Any:
    """A started Toxiproxy container on the host network, its API on ``127.0.0.1:api_port``.

    testcontainers 4.15 has no Toxiproxy module; host networking lets the proxies it creates
    listen on the host's loopback exactly like the local binary's do.
    """
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    container = (
        DockerContainer(TOXIPROXY_IMAGE)
        .with_kwargs(network_mode="host")
        .with_command(f"-host 127.0.0.1 -port {api_port}")
    )
    container.start()
    wait_for_logs(container, "Starting Toxiproxy HTTP server", timeout=30)
    return container


def postgres_container() -> Any:
    """A started PostgreSQL container; ``get_connection_url()`` gives its DSN."""
    from testcontainers.postgres import PostgresContainer

    return PostgresContainer(POSTGRES_IMAGE, driver=None).start()

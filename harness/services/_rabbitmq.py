"""RabbitMQ for queue-consumer targets: found, started, or an error saying what to install.

An address from the environment, or a throwaway node from the local binaries, or a container,
or an error that says what to install.

A throwaway node is a real broker (Debian's ``rabbitmq-server``) with everything of its own, so
that several can run at once (tests run in parallel) and none touches the system's broker:

- its own directory for data, logs, config and the Erlang cookie (``HOME``), deleted afterwards;
- a unique node name and its own loopback ports for AMQP and Erlang distribution;
- its own EPMD (the Erlang port mapper) on a loopback port of its own, started here in the
  foreground and stopped with the node.  Left to itself the node would start ``epmd -daemon``,
  which detaches, outlives the node and listens on every interface;
- no plugins, and a config that reads nothing from ``/etc/rabbitmq``.

Readiness is a real AMQP connection as guest (who may log in from loopback only, which is where
every client of a throwaway node connects from).  A throwaway node is stopped with SIGKILL: its
data is deleted anyway, and a graceful stop goes through the Erlang CLI, which takes seconds.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from harness._errors import ServiceUnavailable
from harness.services import _containers
from harness.services._network import free_port
from harness.services._processes import ManagedProcess

__all__ = ["RabbitServer", "amqp_answers", "find_rabbitmq_server", "start_rabbitmq"]

RABBITMQ_IMAGE = "rabbitmq:3.13-alpine"
START_TIMEOUT = 90.0  # a cold node boots in 3-6 s here; a shared, busy CPU can take far longer

_INSTALL_FIX = (
    "install the broker (`apt-get install -y rabbitmq-server` as root, or `make rabbitmq`), "
    "or set IDEM_AMQP_URL=amqp://USER:PASSWORD@127.0.0.1:5672/ to use a running broker"
)

# Where Debian puts the real scripts; /usr/sbin/rabbitmq-server is a wrapper that switches to
# the system's ``rabbitmq`` user and its /var/lib/rabbitmq, which a throwaway node must not use.
_DEBIAN_SCRIPTS = Path("/usr/lib/rabbitmq/bin")

_CONFIG = """\
listeners.tcp.default = 127.0.0.1:{amqp_port}
log.console = true
log.console.level = error
log.file = false
"""


def find_rabbitmq_server() -> Path | None:
    """The ``rabbitmq-server`` script that starts a node as the caller (not Debian's wrapper)."""
    script = _DEBIAN_SCRIPTS / "rabbitmq-server"
    if script.is_file() and os.access(script, os.X_OK):
        return script
    on_path = shutil.which("rabbitmq-server")  # another layout: a script, not a wrapper
    if on_path and Path(on_path).resolve().name == "rabbitmq-server":
        return Path(on_path).resolve()
    return None


def amqp_answers(url: str, *, timeout: float) -> str | None:
    """Why an AMQP connection to ``url`` fails (the client's reason), or None if it opens.

    Runs the client on an event loop of its own in a thread, so it works the same whether or not
    the caller is inside a running loop.
    """
    outcome: list[str | None] = []

    async def probe() -> None:
        import aio_pika

        connection = await asyncio.wait_for(aio_pika.connect(url, timeout=timeout), timeout)
        await connection.close()

    def run() -> None:
        try:
            asyncio.run(probe())
        except Exception as exc:  # any failure to connect is the answer we are asking for
            outcome.append(f"{type(exc).__name__}: {exc}".rstrip(": "))
        else:
            outcome.append(None)

    thread = threading.Thread(target=run, name="amqp-probe", daemon=True)
    thread.start()
    thread.join(timeout + 5)
    return outcome[0] if outcome else f"no answer within {timeout:g} s"


class RabbitServer:
    """A RabbitMQ broker and its AMQP URL; ``stop`` ends and deletes what this process made."""

    def __init__(self, url: str, *, origin: str, stopper: Any = None) -> None:
        self.url = url
        self.origin = origin
        self._stopper = stopper

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or "127.0.0.1"

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or 5672

    def stop(self) -> None:
        if self._stopper is not None:
            self._stopper.stop()
            self._stopper = None

    close = stop

    def __enter__(self) -> RabbitServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<RabbitServer {self.host}:{self.port} from {self.origin}>"


class _Node:
    """A node this process started, with its EPMD and its directory; removed on ``stop``."""

    def __init__(self, script: Path) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="idem-rabbit-"))
        self.name = f"idem-{os.getpid()}-{secrets.token_hex(3)}@localhost"
        self.amqp_port, self.dist_port, self.epmd_port = free_port(), free_port(), free_port()
        self._epmd = ManagedProcess(
            "EPMD", ["epmd", "-port", str(self.epmd_port), "-address", "127.0.0.1"],
            log_path=self.root / "epmd.log", ready_port=("127.0.0.1", self.epmd_port),
            start_timeout=20.0,
        )
        self._broker = ManagedProcess(
            "RabbitMQ", [str(script)], log_path=self.root / "rabbitmq.log",
            ready_port=("127.0.0.1", self.amqp_port), env=self._environment(),
            cwd=str(self.root), start_timeout=START_TIMEOUT,
        )

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    def _environment(self) -> dict[str, str]:
        """Every place the node would otherwise read or write outside its own directory."""
        root = self.root
        for directory in ("data", "log", "conf.d"):
            (root / directory).mkdir()
        (root / "rabbitmq.conf").write_text(_CONFIG.format(amqp_port=self.amqp_port))
        (root / "enabled_plugins").write_text("[].\n")
        (root / "rabbitmq-env.conf").write_text("")
        return {
            "HOME": str(root),  # the Erlang cookie goes here
            "RABBITMQ_CONF_ENV_FILE": str(root / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(root / "rabbitmq.conf"),
            "RABBITMQ_CONFIG_FILES": str(root / "conf.d"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(root / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(root / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(root / "data"),
            "RABBITMQ_LOG_BASE": str(root / "log"),
            "RABBITMQ_NODENAME": self.name,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.amqp_port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS":
                "-kernel inet_dist_use_interface {127,0,0,1}",
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }

    def start(self) -> None:
        try:
            self._epmd.start()
            self._broker.start()
            deadline = time.monotonic() + START_TIMEOUT
            while (problem := amqp_answers(self.url, timeout=5.0)) is not None:
                if time.monotonic() > deadline or not self._broker.running():
                    raise ServiceUnavailable(
                        "RabbitMQ", f"the node listens but refuses AMQP ({problem}); last lines "
                        f"of {self._broker.log_path}:\n{self._broker.log_tail()}", _INSTALL_FIX)
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._broker.kill()
        self._epmd.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def _start_node(script: Path) -> RabbitServer:
    if shutil.which("epmd") is None:
        raise ServiceUnavailable("RabbitMQ", "Erlang's epmd is not on PATH", _INSTALL_FIX)
    node = _Node(script)
    node.start()
    atexit.register(node.stop)
    return RabbitServer(node.url, origin=str(script), stopper=node)


def _start_container() -> RabbitServer:
    from testcontainers.core.container import DockerContainer

    container = DockerContainer(RABBITMQ_IMAGE).with_exposed_ports(5672)
    container.start()
    url = (f"amqp://guest:guest@{container.get_container_host_ip()}:"
           f"{container.get_exposed_port(5672)}/")
    deadline = time.monotonic() + START_TIMEOUT
    while (problem := amqp_answers(url, timeout=5.0)) is not None:
        if time.monotonic() > deadline:
            container.stop()
            raise ServiceUnavailable("RabbitMQ", f"the container never accepted AMQP ({problem})",
                                     _INSTALL_FIX)
        time.sleep(0.5)
    return RabbitServer(url, origin="testcontainers", stopper=container)


def start_rabbitmq() -> RabbitServer:
    """Find or start RabbitMQ: ``IDEM_AMQP_URL``, local binaries, testcontainers, or an error.

    A broker named by ``IDEM_AMQP_URL`` belongs to someone else: it is used, never stopped.
    """
    env_url = os.environ.get("IDEM_AMQP_URL")
    if env_url:
        problem = amqp_answers(env_url, timeout=5.0)
        if problem is not None:
            raise ServiceUnavailable(
                "RabbitMQ", f"IDEM_AMQP_URL does not accept AMQP connections ({problem})",
                "start that broker, or unset IDEM_AMQP_URL to let the harness start its own",
            )
        return RabbitServer(env_url, origin="IDEM_AMQP_URL")

    script = find_rabbitmq_server()
    if script is not None:
        return _start_node(script)

    if _containers.docker_answers():
        return _start_container()

    raise ServiceUnavailable(
        "RabbitMQ", "no IDEM_AMQP_URL, no rabbitmq-server binaries, no Docker engine",
        _INSTALL_FIX,
    )

"""Kafka for queue-consumer targets: found, started, or an error saying what to install.

An address from the environment (``IDEM_KAFKA_BOOTSTRAP``), or a throwaway single-node KRaft
broker from the jars ``make setup`` resolved from Maven Central (``scripts/ensure-kafka``), or a
container, or an error that says what to install.

**Links: Toxiproxy in front of a Kafka broker.**  A Kafka client connects to its bootstrap
address only to ask for metadata, then connects to the address each broker *advertises*: a proxy
in front of the bootstrap port alone is bypassed after the first request.  So a throwaway broker
is started with one listener per proxied link (``LINK0`` ... ``LINKn``), each on a broker port of
its own and each advertising the loopback address of its own Toxiproxy proxy.  A consumer given
link N's address as its bootstrap learns from the metadata to come back through link N's proxy,
and keeps doing so: cutting, slowing or holding that proxy faults that consumer's every
connection (group coordinator and partition leader alike), and no other consumer's.  The harness
itself talks to the broker directly (``bootstrap``, the ``DIRECT`` listener), so its produces and
its looks at offsets never meet a fault meant for a consumer.

A broker offers ``DEFAULT_LINKS`` (8) links unless asked for more: one per consumer process
that may run at once against it (``take_link`` hands them out, ``release_link`` takes one back
clean).  Given a Toxiproxy client, ``start_kafka`` creates the proxies *before* the broker
starts, each on a port Toxiproxy chose, and advertises those: no port can be taken between the
choice and the bind.  Without one, the ports to advertise are chosen free, and a proxy made later
must listen on ``link.listen``.

A throwaway broker has its own temporary directory (data, config, log), loopback ports of its
own, and settings for tests: offsets and transaction topics with one partition and replication
factor 1, no delay before a group's first rebalance, session timeouts down to 500 ms allowed, and
no automatic topic creation (the harness creates topics, with the partitions it means).  It is
stopped with SIGKILL and its directory deleted: its data is thrown away anyway.
"""

from __future__ import annotations

import atexit
import base64
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness._errors import ServiceError, ServiceUnavailable, ToxiproxyError, UsageError
from harness.services import _containers
from harness.services._kafka_client import KafkaAdmin, KafkaProducer, kafka_answers
from harness.services._network import free_ports, port_taken, require_loopback
from harness.services._paths import project_root
from harness.services._processes import ManagedProcess
from harness.services._toxiproxy import ToxiproxyClient, ToxiproxyProxy

__all__ = [
    "DEFAULT_LINKS",
    "ENV_BOOTSTRAP",
    "ENV_LINKS",
    "KafkaLink",
    "KafkaServer",
    "find_kafka_libs",
    "links_from_environment",
    "start_kafka",
]

ENV_BOOTSTRAP = "IDEM_KAFKA_BOOTSTRAP"
"""A running broker's bootstrap address (``127.0.0.1:9092``): used, never stopped."""
ENV_LINKS = "IDEM_KAFKA_LINKS"
"""With ``IDEM_KAFKA_BOOTSTRAP``: that broker's proxied links, ``BROKER_PORT:ADVERTISED_PORT``
pairs separated by commas (a listener on BROKER_PORT advertising 127.0.0.1:ADVERTISED_PORT)."""
ENV_LIBS = "IDEM_KAFKA_LIBS"
"""A directory of Kafka's broker jars, instead of ``.tools/kafka/libs``."""
DEFAULT_LINKS = 8
KAFKA_IMAGE = "confluentinc/cp-kafka:7.9.0"
START_TIMEOUT = 90.0  # a broker starts in 2-4 s here; a shared, busy CPU can take far longer
_FORMAT_TIMEOUT = 60.0
_PORT_CHOICES = 3
_HOST = "127.0.0.1"

_INSTALL_FIX = (
    "run `make kafka` (scripts/ensure-kafka resolves Apache Kafka's jars from Maven Central into "
    ".tools/kafka; it needs Java 17 or later and Maven), or set "
    f"{ENV_BOOTSTRAP}=127.0.0.1:9092 to use a running broker"
)

#: The broker's JVM: a small heap, and the quick compiler only (it starts about 25% sooner, and
#: a test broker never runs long enough for the optimising one to pay).
_JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                "-XX:-UsePerfData", "-Djava.awt.headless=true")

_LOG4J = """\
log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.BrokerServer=INFO
log4j.logger.kafka.server.ControllerServer=INFO
"""


@dataclass(frozen=True, slots=True)
class KafkaLink:
    """One proxied way to the broker: a listener of its own, advertised as its proxy's address.

    A Toxiproxy proxy for it listens on ``listen`` and forwards to ``upstream``; a consumer given
    ``bootstrap`` (the proxy's address) reaches the broker only through that proxy.
    """

    index: int
    listener: str
    """The broker's listener name (``LINK0``...)."""
    broker_port: int
    """Where the broker listens for this link: the proxy's upstream."""
    proxy_port: int
    """What the broker advertises on this listener: where the proxy must listen."""
    host: str = _HOST

    @property
    def upstream(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def listen(self) -> str:
        return f"{self.host}:{self.proxy_port}"

    @property
    def bootstrap(self) -> str:
        """The bootstrap address to give a consumer that must go through this link."""
        return self.listen


class KafkaServer:
    """A Kafka broker: the harness's direct address, its proxied links, and what it owns.

    ``stop`` ends and deletes what this process made (the broker, its directory, the proxies);
    a broker from ``IDEM_KAFKA_BOOTSTRAP`` is left running.
    """

    def __init__(self, bootstrap: str, *, origin: str, links: Sequence[KafkaLink] = (),
                 proxies: Sequence[ToxiproxyProxy] = (), version: str | None = None,
                 stopper: Any = None) -> None:
        self.bootstrap = bootstrap
        self.origin = origin
        self.links = tuple(links)
        self.version = version
        self._proxies = {proxy.port: proxy for proxy in proxies}
        self._stopper = stopper
        self._free = list(self.links)
        self._lock = threading.Lock()

    @property
    def host(self) -> str:
        return self.bootstrap.split(",")[0].rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.bootstrap.split(",")[0].rsplit(":", 1)[1])

    def admin(self, *, timeout: float = 10.0) -> KafkaAdmin:
        """Topics, offsets and groups, over the direct listener."""
        return KafkaAdmin(self.bootstrap, timeout=timeout)

    def producer(self, *, timeout: float = 10.0) -> KafkaProducer:
        """A producer over the direct listener: the harness's messages meet no consumer fault."""
        return KafkaProducer(self.bootstrap, timeout=timeout)

    def proxy(self, link: KafkaLink) -> ToxiproxyProxy:
        """The Toxiproxy proxy ``start_kafka`` made for ``link``."""
        try:
            return self._proxies[link.proxy_port]
        except KeyError:
            raise UsageError(
                f"link {link.index} of the broker at {self.bootstrap} has no proxy made by the "
                f"harness; start it with start_kafka(toxiproxy=...), or create a proxy listening "
                f"on {link.listen} with upstream {link.upstream}") from None

    def take_link(self) -> KafkaLink:
        """A link no one else holds (one per consumer process), until ``release_link``."""
        with self._lock:
            if not self._free:
                reason = (f"all {len(self.links)} of its proxied links are taken"
                          if self.links else "it offers no proxied links")
                raise ServiceError(
                    f"Kafka at {self.bootstrap}: {reason}; start the broker with more "
                    f"(start_kafka(links=N)), or for a broker of your own list them in "
                    f"{ENV_LINKS}")
            return self._free.pop(0)

    def release_link(self, link: KafkaLink) -> None:
        """Give ``link`` back, its proxy enabled again and without toxics."""
        proxy = self._proxies.get(link.proxy_port)
        if proxy is not None:
            proxy.enable()
            proxy.clear_toxics()
        with self._lock:
            if link in self.links and link not in self._free:
                self._free.append(link)

    @contextmanager
    def link(self) -> Iterator[KafkaLink]:
        """A link for the block: taken, then given back clean."""
        taken = self.take_link()
        try:
            yield taken
        finally:
            self.release_link(taken)

    def stop(self) -> None:
        for proxy in self._proxies.values():
            with suppress(ToxiproxyError):
                proxy.delete()
        self._proxies.clear()
        if self._stopper is not None:
            self._stopper.stop()
            self._stopper = None

    close = stop

    def __enter__(self) -> KafkaServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (f"<KafkaServer {self.bootstrap} from {self.origin}, "
                f"{len(self.links)} link(s)>")


def find_kafka_libs() -> Path | None:
    """The directory of Kafka's broker jars: ``IDEM_KAFKA_LIBS``, else ``.tools/kafka/libs`` of
    the checkout or of the working directory."""
    explicit = os.environ.get(ENV_LIBS)
    candidates = [Path(explicit)] if explicit else [
        project_root() / ".tools" / "kafka" / "libs", Path.cwd() / ".tools" / "kafka" / "libs"]
    for directory in candidates:
        if any(directory.glob("kafka_2.*.jar")):
            return directory
    return None


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def _version(libs: Path) -> str | None:
    stamped = libs.parent / "VERSION"
    with suppress(OSError):
        return stamped.read_text().strip() or None
    jar = next(iter(sorted(libs.glob("kafka_2.*-*.jar"))), None)
    return jar.stem.split("-", 1)[1] if jar else None


def _cluster_id() -> str:
    """A cluster id as Kafka writes one: 16 random bytes, URL-safe base64 without padding (and
    not starting with a dash, which Kafka's tools would read as an option)."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class _Broker:
    """A broker this process started, with its directory; removed on ``stop``."""

    def __init__(self, java: str, libs: Path, *,
                 link_ports: Sequence[tuple[int, int]]) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="idem-kafka-"))
        self.java = java
        self.classpath = f"{libs}/*"
        taken = {port for pair in link_ports for port in pair}
        self.port, self.controller_port = [
            port for port in free_ports(len(taken) + 2) if port not in taken][:2]
        self.links = tuple(
            KafkaLink(index, f"LINK{index}", broker_port, proxy_port)
            for index, (broker_port, proxy_port) in enumerate(link_ports))
        (self.root / "data").mkdir()
        (self.root / "log4j.properties").write_text(_LOG4J)
        (self.root / "server.properties").write_text(self._properties())
        self._process = ManagedProcess(
            "Kafka", [*self._jvm(), "kafka.Kafka", str(self.root / "server.properties")],
            log_path=self.root / "kafka.log", ready_port=(_HOST, self.port),
            cwd=str(self.root), start_timeout=START_TIMEOUT,
        )

    @property
    def bootstrap(self) -> str:
        return f"{_HOST}:{self.port}"

    def ports(self) -> list[int]:
        return [self.port, self.controller_port, *(link.broker_port for link in self.links)]

    def _jvm(self) -> list[str]:
        return [self.java, *_JVM_OPTIONS,
                f"-Dlog4j.configuration=file:{self.root / 'log4j.properties'}",
                "-cp", self.classpath]

    def _properties(self) -> str:
        links = self.links
        listeners = [f"DIRECT://{_HOST}:{self.port}", f"CONTROLLER://{_HOST}:{self.controller_port}",
                     *(f"{link.listener}://{_HOST}:{link.broker_port}" for link in links)]
        advertised = [f"DIRECT://{_HOST}:{self.port}",
                      *(f"{link.listener}://{link.listen}" for link in links)]
        protocols = ["DIRECT:PLAINTEXT", "CONTROLLER:PLAINTEXT",
                     *(f"{link.listener}:PLAINTEXT" for link in links)]
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{_HOST}:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "DIRECT",
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocols),
            "log.dirs": str(self.root / "data"),
            # One broker: every internal topic has one replica, and one partition is enough.
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "1",
            "default.replication.factor": "1",
            "min.insync.replicas": "1",
            "num.partitions": "1",
            # Groups for tests: the first rebalance at once, short sessions allowed.
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "500",
            # The harness creates its topics with the partitions it means.
            "auto.create.topics.enable": "false",
            "delete.topic.enable": "true",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
        }
        return "".join(f"{name}={value}\n" for name, value in settings.items())

    def format(self) -> None:
        """``kafka.tools.StorageTool format``: the log directory a KRaft node needs first."""
        command = [*self._jvm(), "kafka.tools.StorageTool", "format", "-t", _cluster_id(),
                   "-c", str(self.root / "server.properties")]
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=_FORMAT_TIMEOUT, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            raise ServiceUnavailable("Kafka", f"formatting its storage took over "
                                     f"{_FORMAT_TIMEOUT:g} s", _INSTALL_FIX) from exc
        if done.returncode != 0:
            # the exception's own line (what is wrong) before the last lines of its stack
            lines = (done.stderr or done.stdout).strip().splitlines()
            said = [line for line in lines if not line.lstrip().startswith("at ")][:5] \
                + lines[-3:]
            raise ServiceUnavailable(
                "Kafka", f"kafka.tools.StorageTool format exited {done.returncode}:\n"
                + "\n".join(said), _INSTALL_FIX)

    def start(self) -> None:
        try:
            self.format()
            self._process.start()
            deadline = time.monotonic() + START_TIMEOUT
            while (problem := kafka_answers(self.bootstrap, timeout=5.0)) is not None:
                if time.monotonic() > deadline or not self._process.running():
                    raise ServiceUnavailable(
                        "Kafka", f"the broker listens but does not answer ({problem}); last "
                        f"lines of its log:\n{self._process.log_tail()}", _INSTALL_FIX)
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self._process.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def _start_broker(java: str, libs: Path, *, links: int,
                  toxiproxy: ToxiproxyClient | None) -> KafkaServer:
    """A throwaway broker; with ``toxiproxy``, a proxy per link made first.  A start that fails
    while another process holds one of its ports is tried again on other ports."""
    for attempt in range(_PORT_CHOICES):
        proxies: list[ToxiproxyProxy] = []
        broker: _Broker | None = None
        try:
            broker_ports = free_ports(links)
            if toxiproxy is not None:
                name = f"kafka-{os.getpid()}-{secrets.token_hex(3)}"
                proxies = [toxiproxy.create_proxy(f"{name}-link{index}", f"{_HOST}:{port}")
                           for index, port in enumerate(broker_ports)]
                link_ports = [proxy.port for proxy in proxies]
            else:
                link_ports = [p for p in free_ports(2 * links)
                              if p not in broker_ports][:links]
            broker = _Broker(java, libs, link_ports=list(zip(broker_ports, link_ports,
                                                             strict=True)))
            broker.start()
        except ServiceUnavailable:
            for proxy in proxies:
                with suppress(ToxiproxyError):
                    proxy.delete()
            taken = broker is not None and any(port_taken(_HOST, p) for p in broker.ports())
            if attempt + 1 < _PORT_CHOICES and taken:
                continue
            raise
        except BaseException:
            for proxy in proxies:
                with suppress(ToxiproxyError):
                    proxy.delete()
            raise
        assert broker is not None
        atexit.register(broker.stop)
        return KafkaServer(broker.bootstrap, origin=str(libs), links=broker.links,
                           proxies=proxies, version=_version(libs), stopper=broker)
    raise AssertionError("unreachable")


def links_from_environment(raw: str) -> list[KafkaLink]:
    """The links ``IDEM_KAFKA_LINKS`` names for a running broker (``BROKER_PORT:ADVERTISED_PORT``
    pairs), each advertised on the loopback address where its proxy must listen."""
    links: list[KafkaLink] = []
    for index, pair in enumerate(part.strip() for part in raw.split(",") if part.strip()):
        broker, _, advertised = pair.partition(":")
        if not (broker.isdigit() and advertised.isdigit()
                and 0 < int(broker) < 65536 and 0 < int(advertised) < 65536):
            raise UsageError(
                f"{ENV_LINKS}={raw!r}: {pair!r} is not BROKER_PORT:ADVERTISED_PORT; write e.g. "
                f"{ENV_LINKS}=19100:19200,19101:19201 (a listener on 19100 advertising "
                f"127.0.0.1:19200, ...)")
        links.append(KafkaLink(index, f"LINK{index}", int(broker), int(advertised)))
    return links


def _from_environment(bootstrap: str) -> KafkaServer:
    allow_remote = os.environ.get("IDEM_ALLOW_REMOTE") == "1"
    for address in bootstrap.split(","):
        require_loopback(address.strip(), allow_remote=allow_remote)
    problem = kafka_answers(bootstrap, timeout=5.0)
    if problem is not None:
        raise ServiceUnavailable(
            "Kafka", f"{ENV_BOOTSTRAP}={bootstrap} does not answer ({problem})",
            f"start that broker, or unset {ENV_BOOTSTRAP} to let the harness start its own")
    links = links_from_environment(os.environ.get(ENV_LINKS, ""))
    return KafkaServer(bootstrap, origin=ENV_BOOTSTRAP, links=links)


def _start_container() -> KafkaServer:
    from testcontainers.community.kafka import KafkaContainer

    container = KafkaContainer(KAFKA_IMAGE).with_kraft()
    container.start()
    bootstrap = container.get_bootstrap_server()
    problem = kafka_answers(bootstrap, timeout=30.0)
    if problem is not None:
        container.stop()
        raise ServiceUnavailable("Kafka", f"the container never answered ({problem})",
                                 _INSTALL_FIX)
    # Its listeners are the image's own: no proxied links (link faults need the local jars).
    return KafkaServer(bootstrap, origin="testcontainers", stopper=container)


def start_kafka(*, links: int = DEFAULT_LINKS,
                toxiproxy: ToxiproxyClient | None = None) -> KafkaServer:
    """Find or start Kafka: ``IDEM_KAFKA_BOOTSTRAP``, the local jars, testcontainers, or an
    error naming the fix.

    ``links`` is how many proxied links a broker started here offers; with ``toxiproxy``, their
    proxies are made on that server (and deleted by ``stop``).
    """
    if links < 0:
        raise UsageError(f"a broker offers 0 or more proxied links, not {links}")
    env_bootstrap = os.environ.get(ENV_BOOTSTRAP)
    if env_bootstrap:
        return _from_environment(env_bootstrap)

    libs = find_kafka_libs()
    if libs is not None:
        java = _java()
        if java is None:
            raise ServiceUnavailable("Kafka", "Java is not installed (no java on PATH, no "
                                     "JAVA_HOME)", "install Java 17 or later "
                                     "(`apt-get install -y default-jre-headless`), or set "
                                     f"{ENV_BOOTSTRAP}=127.0.0.1:9092")
        return _start_broker(java, libs, links=links, toxiproxy=toxiproxy)

    if _containers.docker_answers():
        return _start_container()

    raise ServiceUnavailable(
        "Kafka", f"no {ENV_BOOTSTRAP}, no Kafka jars in .tools/kafka/libs, no Docker engine",
        _INSTALL_FIX)

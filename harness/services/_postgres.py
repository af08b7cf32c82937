"""PostgreSQL for the stores that need it: found, started, or an error saying what to install.

An address from the environment, or a throwaway cluster from the local binaries, or a container,
or an error that says what to install.

A throwaway cluster lives in a temporary directory, listens on a free loopback port, trusts
local connections and is deleted when closed.  ``initdb`` refuses to run as root, so as root
the cluster runs as an unprivileged user.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from harness._errors import ServiceUnavailable
from harness.services import _containers
from harness.services._network import free_port

__all__ = ["PostgresServer", "find_postgres_bin", "start_postgres"]

_INSTALL_FIX = (
    "install the server binaries (`apt-get install -y postgresql` as root, or `make postgres`), "
    "or set IDEM_PG_DSN=postgresql://USER@127.0.0.1:5432/DB to use a running server"
)


def find_postgres_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``: PATH first, then Debian's layout."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    def major(pg_ctl: str) -> int:
        name = Path(pg_ctl).parent.parent.name
        return int(name) if name.isdigit() else 0

    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=major)
    return Path(versions[-1]).parent if versions else None


@dataclass
class _Cluster:
    """A cluster this process created; removed on ``stop``."""

    bin_dir: Path
    root: Path
    run_as: pwd.struct_passwd | None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        kwargs: dict[str, Any] = {}
        if self.run_as is not None:
            kwargs = {"user": self.run_as.pw_uid, "group": self.run_as.pw_gid}
        env = {**os.environ, "HOME": str(self.root), "LC_ALL": "C"}
        return subprocess.run(
            args, capture_output=True, text=True, env=env, cwd=self.root, timeout=120, **kwargs
        )

    def stop(self) -> None:
        if not self.data_dir.exists():
            return
        result = self.run(str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m",
                          "immediate", "-w", "-t", "20", "stop")
        if result.returncode != 0:
            self._kill_postmaster()
        shutil.rmtree(self.root, ignore_errors=True)

    def _kill_postmaster(self) -> None:
        pid_file = self.data_dir / "postmaster.pid"
        with suppress(OSError, ValueError, IndexError):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)


class PostgresServer:
    """A PostgreSQL server and its DSN; ``close`` stops and deletes what this process made.

    On a server someone else runs (``IDEM_PG_DSN``) that is the databases this process
    created: each has a name of its own, so two runs sharing the server never drop each other's
    database, and none is left behind to fill the server up."""

    def __init__(self, dsn: str, *, origin: str, stopper: Any = None) -> None:
        self.dsn = dsn
        self.origin = origin
        self._stopper = stopper
        self._created: list[str] = []
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        info = psycopg.conninfo.conninfo_to_dict(self.dsn)
        return int(info.get("port") or 5432)

    def create_database(self, prefix: str) -> str:
        """Create a fresh database named ``prefix`` and a suffix of its own; return its URL."""
        name = f"{prefix[:54]}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        with self._lock:
            self._created.append(name)
        info = psycopg.conninfo.conninfo_to_dict(self.dsn)
        credentials = str(info.get("user") or "postgres")
        if info.get("password"):
            credentials += f":{quote(str(info['password']), safe='')}"
        return (f"postgresql://{credentials}@{info.get('host') or '127.0.0.1'}:"
                f"{info.get('port') or 5432}/{name}")

    def close(self) -> None:
        if self._stopper is not None:  # the whole cluster is ours: it goes, databases and all
            self._stopper.stop()
            self._stopper = None
            return
        with self._lock:
            created, self._created = self._created, []
        if not created:
            return
        # A server that went away has nothing left to drop.
        with suppress(psycopg.Error), psycopg.connect(self.dsn, autocommit=True,
                                                      connect_timeout=5) as conn:
            for name in created:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def __enter__(self) -> PostgresServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _unprivileged_user() -> pwd.struct_passwd | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise ServiceUnavailable(
        "PostgreSQL", "running as root and no unprivileged user (postgres, nobody) exists",
        "create one (`useradd postgres`) or run the harness as a normal user",
    )


def _start_cluster(bin_dir: Path) -> PostgresServer:
    run_as = _unprivileged_user()
    root = Path(tempfile.mkdtemp(prefix="idem-pg-"))
    if run_as is not None:
        os.chown(root, run_as.pw_uid, run_as.pw_gid)
    cluster = _Cluster(bin_dir, root, run_as)
    port = free_port()
    initdb = cluster.run(str(bin_dir / "initdb"), "-D", str(cluster.data_dir), "-U", "postgres",
                         "--auth=trust", "--no-sync", "-E", "UTF8")
    if initdb.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise ServiceUnavailable("PostgreSQL", f"initdb failed: {initdb.stderr.strip()}",
                                 _INSTALL_FIX)
    options = (f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off "
               "-c full_page_writes=off -c max_connections=300")
    started = cluster.run(str(bin_dir / "pg_ctl"), "-D", str(cluster.data_dir), "-l",
                          str(root / "postgres.log"), "-w", "-t", "60", "-o", options, "start")
    if started.returncode != 0:
        log = (root / "postgres.log").read_text(errors="replace")[-2000:]
        cluster.stop()
        raise ServiceUnavailable("PostgreSQL", f"pg_ctl start failed: {started.stderr}\n{log}",
                                 _INSTALL_FIX)
    atexit.register(cluster.stop)
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
    return PostgresServer(dsn, origin=str(bin_dir), stopper=cluster)


def start_postgres() -> PostgresServer:
    """Find or start PostgreSQL: ``IDEM_PG_DSN``, local binaries, testcontainers, or an error.

    A server named by ``IDEM_PG_DSN`` belongs to someone else: it is used, never stopped.
    """
    env_dsn = os.environ.get("IDEM_PG_DSN")
    if env_dsn:
        try:
            psycopg.connect(env_dsn, connect_timeout=5).close()
        except psycopg.Error as exc:
            raise ServiceUnavailable(
                "PostgreSQL", f"IDEM_PG_DSN does not accept connections ({exc})",
                "start that server, or unset IDEM_PG_DSN to let the harness start its own",
            ) from exc
        return PostgresServer(env_dsn, origin="IDEM_PG_DSN")

    bin_dir = find_postgres_bin()
    if bin_dir is not None:
        return _start_cluster(bin_dir)

    if _containers.docker_answers():
        container = _containers.postgres_container()
        return PostgresServer(container.get_connection_url(), origin="testcontainers",
                              stopper=container)

    raise ServiceUnavailable(
        "PostgreSQL", "no IDEM_PG_DSN, no initdb/pg_ctl binaries, no Docker engine", _INSTALL_FIX
    )

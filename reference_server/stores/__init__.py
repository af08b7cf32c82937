"""Stores: where keys, stored responses, charges and the test clock live.

``store_from_url`` picks one from ``--store``: ``sqlite:///ABSOLUTE/PATH`` or
``postgresql://...`` (or a libpq ``host=... dbname=...`` string).  PostgreSQL support is
imported only when asked for, so a SQLite server starts without loading the driver.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from reference_server.stores._base import Commit, Completion, Store, StoreKind, StoreUnavailable

__all__ = [
    "Commit",
    "Completion",
    "Store",
    "StoreKind",
    "StoreUnavailable",
    "StoreUrlError",
    "check_store_url",
    "sqlite_path",
    "store_from_url",
    "store_kind",
]

_FORMS = "sqlite:///ABSOLUTE/PATH or postgresql://USER@HOST:PORT/DB"
_CONNINFO = re.compile(r"\s*(host|hostaddr|port|dbname|user|service)\s*=")


class StoreUrlError(ValueError):
    """``--store`` names no store this server can open; the message shows the accepted forms."""


def store_kind(url: str) -> StoreKind:
    """Which store ``url`` names.  A libpq ``key=value`` string (what ``PostgresServer.
    create_database`` returns) is accepted for PostgreSQL beside the URL form."""
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        return "sqlite"
    if scheme in {"postgresql", "postgres"} or _CONNINFO.match(url):
        return "postgresql"
    raise StoreUrlError(f"{url!r}: unknown kind of store; write {_FORMS}")


def sqlite_path(url: str) -> Path:
    """The file named by a ``sqlite:///ABSOLUTE/PATH`` URL, checked before anything opens it."""
    parts = urlsplit(url)
    if parts.netloc or not parts.path.startswith("/") or parts.query or parts.fragment:
        raise StoreUrlError(
            f"{url!r}: a SQLite store needs an absolute path, as in "
            "sqlite:///var/lib/idem/keys.sqlite3 (three slashes, then the path)"
        )
    path = Path("/" + parts.path.lstrip("/"))
    if path.parent == Path("/"):
        raise StoreUrlError(
            f"{url!r} names {path}, a file in the filesystem root, which is almost never meant "
            f"(three slashes, then an absolute path); for a file here write "
            f"sqlite://{Path.cwd() / path.name}"
        )
    if path.is_dir():
        raise StoreUrlError(f"{url!r}: {path} is a directory; name a file in it")
    if not path.parent.is_dir():
        raise StoreUrlError(f"{url!r}: the directory {path.parent} does not exist")
    return path


def check_store_url(url: str) -> StoreKind:
    """The kind of store ``url`` names, after every check that needs no connection."""
    kind = store_kind(url)
    if kind == "sqlite":
        sqlite_path(url)
    return kind


def store_from_url(url: str) -> Store:
    """A store for ``url``, not yet opened; ``StoreUrlError`` if the URL is not usable."""
    if store_kind(url) == "sqlite":
        from reference_server.stores._sqlite import SqliteStore

        return SqliteStore(sqlite_path(url))
    from reference_server.stores._postgres import PostgresStore

    if url.lower().startswith("postgres") and not urlsplit(url).hostname and "host=" not in url:
        raise StoreUrlError(f"{url!r}: name the host, as in {_FORMS}")
    return PostgresStore(url)

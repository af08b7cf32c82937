"""The built-in reference server as a target, with what ``--store`` and ``--flaw`` pass on.

The target file ``reference`` with the flags ``--reference``, ``--store`` and ``--flaw``.  Every
front end (run, matrix, load, explore, demo, the benches) starts the reference server through
this one function."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from harness._errors import UsageError
from harness._target import StoreProxy, Target
from harness.targets._loader import BUILTIN_TARGETS, load_target

__all__ = ["FlawNames", "check_flags", "flaw_names", "flaws_and_store", "reference_name",
           "reference_options", "reference_target"]

#: The named flaws a reference is started with: one name, several (``--flaw a --flaw b``), or
#: none.
FlawNames = str | Sequence[str] | None


def flaw_names(flaw: FlawNames) -> tuple[str, ...]:
    """``flaw`` as a tuple of names (empty: the correct reference)."""
    if flaw is None:
        return ()
    return (flaw,) if isinstance(flaw, str) else tuple(flaw)


def reference_target(*, store: str | None, flaw: FlawNames, servers: int = 1) -> Target:
    """The built-in reference target file, with the flags ``--reference`` passes on.

    A PostgreSQL store is reached through a Toxiproxy proxy of the harness's ([store_proxy]),
    so store scenarios can fault the connection between the server and its database, and
    through the proxy that reads PostgreSQL's protocol, so they can strike right after a
    commit (``protocol = "postgresql"``).
    """
    check_flags(store=store, flaw=flaw)
    target = load_target("reference")
    args: list[str] = []
    if store and store.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(store)
        if not parts.hostname:
            raise UsageError(f"--store {store} names no host; write "
                             "postgresql://USER@127.0.0.1:5432/DB")
        upstream = f"{parts.hostname}:{parts.port or 5432}"
        target = target.model_copy(update={"store_proxy": StoreProxy(upstream=upstream,
                                                                      protocol="postgresql")})
        credentials = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        store = urlunsplit(parts._replace(netloc=credentials + "{store_proxy}"))
    if store:
        args += ["--store", store]
    for name in flaw_names(flaw):
        args += ["--flaw", name]
    if servers > 1 and not store:
        raise UsageError("several reference server processes need a shared --store "
                         "(postgresql://... or sqlite:///PATH)")
    target = target.model_copy(update={"name": reference_name(store=store, flaw=flaw)})
    target = target.with_enable_hints(_ENABLE_HINTS)
    return target.with_start_args(args) if args else target


def reference_options(target: Target) -> dict[str, Any] | None:
    """How ``reference_target`` made ``target``: its flaw and its kind of store (``sqlite`` or
    ``postgresql``), so a reproduction can start the server again the same way on a fresh store
    of that kind; None for any other target."""
    start = target.start
    builtin = (BUILTIN_TARGETS / "reference.toml").resolve()
    if start is None or not target.source or Path(target.source).resolve() != builtin:
        return None
    flaws: list[str] = []
    store = ""
    for flag, value in zip(start.command, start.command[1:], strict=False):
        if flag == "--flaw":
            flaws.append(value)
        elif flag == "--store":
            store = value
    flaw: str | list[str] | None = (None if not flaws else flaws[0] if len(flaws) == 1
                                    else flaws)
    return {"flaw": flaw, "store": "postgresql" if store.startswith("postgres") else "sqlite"}


#: The flags that give the reference server what its target file cannot.
_ENABLE_HINTS = {
    "store-proxy": "runs on SQLite, which has no connection to cut: add --postgres (the "
                   "server on PostgreSQL, reached through a proxy the harness can fault)",
}


def check_flags(*, store: str | None, flaw: FlawNames,
                combine: Callable[[Sequence[str]], object] | None = None) -> None:
    """Refuse a bad --flaw (unknown, or flaws that cannot be combined) or --store before
    Toxiproxy or the service starts; ``combine`` checks the flaws by name (default the HTTP
    server's; the consumer passes its own)."""
    from reference_server.flaws import FlawClash, UnknownFlaw, flaws_named
    from reference_server.stores import StoreUrlError, check_store_url

    try:
        (combine or flaws_named)(flaw_names(flaw))
        if store is not None:
            check_store_url(store)
    except UnknownFlaw as exc:
        raise UsageError(f"--flaw: {exc.args[0]}") from None
    except FlawClash as exc:
        raise UsageError(f"--flaw: {exc}") from None
    except StoreUrlError as exc:
        raise UsageError(f"--store: {exc}") from None


def reference_name(*, store: str | None, flaw: FlawNames) -> str:
    """What every report calls the server: which flaws it was started with, on which store,
    so a page or a JUnit file says what was tested without the command line beside it."""
    return f"reference-server ({flaws_and_store(store=store, flaw=flaw)})"


def flaws_and_store(*, store: str | None, flaw: FlawNames) -> str:
    """``flaw a + b, SQLite``: a reference's flaws (or ``correct``) and its kind of store."""
    kind = "PostgreSQL" if store and store.startswith("postgres") else "SQLite"
    names = flaw_names(flaw)
    shown = f"flaw{'s' if len(names) > 1 else ''} {' + '.join(names)}" if names else "correct"
    return f"{shown}, {kind}"

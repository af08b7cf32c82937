"""The clock of an unmodified target, moved from outside with libfaketime.

Every process the harness starts for the target (and every process those start: its Redis, its
database) runs with libfaketime preloaded and ``FAKETIME_TIMESTAMP_FILE`` pointing at one file
the harness owns.  The file holds the offset from real time (``+3600``); advancing the clock
rewrites it, atomically, and with caching off (``FAKETIME_NO_CACHE=1``) every process reads the
new offset on its next clock call: one jump, seen by the whole tree at once.

Only the wall clock moves.  The monotonic clock is left alone
(``FAKETIME_DONT_FAKE_MONOTONIC=1``): event loops, timers, timeouts and worker watchdogs measure
intervals on it, and a monotonic clock that jumped a day would fire every timer at once (or, for
a jump back, none).  A TTL or a retention is a wall-clock deadline, and that is what moves.
File times stay what the kernel wrote.

A jump waits ``SETTLE`` seconds first.  Some libraries store a response after sending it (fire
and forget: express-idempotency writes its record, with a fresh TTL, once ``res.send`` has run);
a jump made the moment the answer arrives would stamp that write on the new clock and restart its
TTL there, so a 24 h retention would measure as 48 h.  A real client retrying a day later never
races that write; the pause lets it land on the clock it ran on.

libfaketime 0.9.10 hangs a program linked with jemalloc at its start (Debian's redis-server);
``harness/services/_clock_shim.c``, preloaded first, gets it past that (its header says how).

libfaketime also wants a semaphore and a shared-memory segment, named in ``FAKETIME_SHARED``.
Left to itself, the first process of a tree creates them under its own pid and every fork of it
(a shell's ``$(...)``) removes them when it exits, so a process started next (``exec python``
in a start script) finds the names gone and dies with "sem_open failed".  The clock creates
them itself, under names of its own, and hands them to every process: none of them creates or
removes any, and the clock removes both when it closes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import secrets
import time
import weakref
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

from harness._errors import ServiceUnavailable
from harness.services._paths import project_root

__all__ = ["FaketimeClock", "find_libfaketime", "find_shim"]

#: Where Debian and a source install put the multi-threaded library (time() calls serialised,
#: as a threaded server needs), then the single-threaded one.
_LIBRARY_GLOBS = (
    "/usr/lib/*/faketime/libfaketimeMT.so.1",
    "/usr/lib/faketime/libfaketimeMT.so.1",
    "/usr/local/lib/faketime/libfaketimeMT.so.1",
    "/usr/lib/*/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)
SHIM_NAME = "libidem-clock-shim.so"
#: Seconds a jump waits for the target's writes after its last answer (module docstring).
SETTLE = 0.2
_INSTALL = ("run scripts/ensure-faketime (make setup does), which installs Debian's faketime "
            "and libfaketime packages when absent and builds the preload shim")
_SHM = Path("/dev/shm")
#: Bytes of the shared segment: libfaketime maps its few counters (under 100 bytes) from it.
_SEGMENT_BYTES = 4096


def find_libfaketime() -> Path:
    """libfaketime's preload library: ``$IDEM_LIBFAKETIME``, else the usual install paths."""
    explicit = os.environ.get("IDEM_LIBFAKETIME")
    if explicit:
        if Path(explicit).is_file():
            return Path(explicit)
        raise ServiceUnavailable("libfaketime", f"IDEM_LIBFAKETIME={explicit} is not a file",
                                 "point IDEM_LIBFAKETIME at libfaketimeMT.so.1, or unset it")
    for pattern in _LIBRARY_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return Path(found[0])
    raise ServiceUnavailable("libfaketime", "its preload library (libfaketimeMT.so.1) is not "
                             "installed, and [clock] kind = \"faketime\" needs it", _INSTALL)


def find_shim() -> Path:
    """The preload shim built from ``harness/services/_clock_shim.c``: ``$IDEM_FAKETIME_SHIM``, else
    ``.tools/`` of the checkout or of the current directory."""
    explicit = os.environ.get("IDEM_FAKETIME_SHIM")
    candidates = ([Path(explicit)] if explicit else
                  [project_root() / ".tools" / SHIM_NAME, Path.cwd() / ".tools" / SHIM_NAME])
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ServiceUnavailable("the libfaketime preload shim", f"{candidates[0]} is not built",
                             _INSTALL)


class FaketimeClock:
    """The offset file of one deployment, and the environment that makes a process read it."""

    via = "libfaketime"

    def __init__(self, directory: Path) -> None:
        self._preload = f"{find_shim()}:{find_libfaketime()}"
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory.absolute() / "faketime.rc"
        self.offset = 0.0
        self._write()
        self._semaphore, self._segment = _shared_names()
        # removed at close, or when the clock is collected or the process exits without it
        self._remove_names = weakref.finalize(self, _remove, self._semaphore, self._segment)

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` with libfaketime preloaded (ahead of any ``LD_PRELOAD`` already asked for)."""
        already = env.get("LD_PRELOAD") or os.environ.get("LD_PRELOAD")
        return {
            **env,
            "LD_PRELOAD": f"{self._preload}:{already}" if already else self._preload,
            "FAKETIME_TIMESTAMP_FILE": str(self.path),
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_SHARED": f"{self._semaphore} {self._segment}",
        }

    def advance(self, seconds: float) -> None:
        time.sleep(SETTLE)
        self.offset += seconds
        self._write()

    def _write(self) -> None:
        """Replace the file in one rename: a process reading it never sees it half-written."""
        partial = self.path.with_suffix(".tmp")
        partial.write_text(f"{self.offset:+.6f}\n", encoding="ascii")
        partial.replace(self.path)

    def close(self) -> None:
        """Remove the semaphore and the segment every process of the target shared."""
        self._remove_names()


def _remove(semaphore: str, segment: str) -> None:
    _libc().sem_unlink(semaphore.encode())
    with suppress(FileNotFoundError):
        (_SHM / segment.lstrip("/")).unlink()


@functools.cache
def _libc() -> ctypes.CDLL:
    """The C library, with the signatures of the semaphore calls (loaded once)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.sem_open.restype = ctypes.c_void_p
    libc.sem_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_uint]
    libc.sem_unlink.argtypes = [ctypes.c_char_p]
    libc.sem_close.argtypes = [ctypes.c_void_p]
    return libc


def _shared_names() -> tuple[str, str]:
    """A new semaphore (value 1, as libfaketime makes it) and shared segment, by name."""
    token = f"{os.getpid()}_{secrets.token_hex(4)}"
    semaphore, segment = f"/idem_faketime_sem_{token}", f"/idem_faketime_shm_{token}"
    libc = _libc()
    handle = libc.sem_open(semaphore.encode(), os.O_CREAT | os.O_EXCL, 0o600, 1)
    if not handle or handle == ctypes.c_void_p(-1).value:
        error = ctypes.get_errno()
        raise ServiceUnavailable("libfaketime", f"its semaphore {semaphore} could not be made: "
                                 f"{os.strerror(error)}", "check that /dev/shm is writable")
    libc.sem_close(handle)
    descriptor = os.open(_SHM / segment.lstrip("/"), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(descriptor, _SEGMENT_BYTES)
    finally:
        os.close(descriptor)
    return semaphore, segment

"""Writing report files so that a reader never sees half of one."""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

__all__ = ["file_mode", "write_all", "write_atomic"]

_UMASK_LINE = re.compile(r"^Umask:\s*([0-7]+)$", re.MULTILINE)


def _umask() -> int:
    """The process's umask, read without changing it: ``os.umask`` can only set it, and setting
    it for a moment would give another thread's new files the wrong mode."""
    try:
        found = _UMASK_LINE.search(Path("/proc/self/status").read_text())
    except OSError:
        found = None
    if found:
        return int(found.group(1), 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode(path: Path, *, executable: bool = False) -> int:
    """The mode a file written at ``path`` should have: the mode of the file it replaces, else
    what ``open`` would give a new one under the umask (a temporary file is always 0600, which
    CI artefact uploaders and other users cannot read)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    if executable:
        mode |= (mode & 0o444) >> 2  # execute wherever it may be read
    return mode


def write_atomic(path: Path, text: str, *, executable: bool = False) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = file_mode(path, executable=executable)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_all(files: dict[Path, str], *, executable: frozenset[Path] = frozenset()) -> None:
    """Write every file or none: each to a temporary file first, then all renamed into place,
    so a disk that fills up half-way leaves the files as they were (an empty history.jsonl
    beside a results.json that cites it would be worse than none).  Raises ``OSError``."""
    written: list[tuple[str, Path]] = []
    try:
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            mode = file_mode(path, executable=path in executable)
            fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                             suffix=".tmp")
            written.append((temporary, path))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), mode)
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
    except BaseException:
        for temporary, _ in written:
            Path(temporary).unlink(missing_ok=True)
        raise
    for temporary, path in written:
        os.replace(temporary, path)

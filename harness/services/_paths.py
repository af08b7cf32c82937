"""Where the harness keeps what it builds and what its services write."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["find_tool", "project_root", "state_dir"]


def project_root() -> Path:
    """The checkout this package runs from (meaningful for an editable install)."""
    return Path(__file__).resolve().parents[2]


def state_dir() -> Path:
    """A writable directory for logs and throwaway data: ``$IDEM_STATE_DIR`` or the XDG state."""
    explicit = os.environ.get("IDEM_STATE_DIR")
    if explicit:
        base = Path(explicit)
    else:
        xdg = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        base = Path(xdg) / "idem-harness"
    base.mkdir(parents=True, exist_ok=True)
    return base


def find_tool(name: str, *, env_var: str) -> Path | None:
    """Find a helper binary: the env var, then ``.tools/`` of the checkout or cwd, then PATH."""
    explicit = os.environ.get(env_var)
    if explicit:
        return Path(explicit)
    for tools in (project_root() / ".tools", Path.cwd() / ".tools"):
        candidate = tools / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    return Path(found) if found else None

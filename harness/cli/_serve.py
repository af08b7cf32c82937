"""``idem-harness serve``: the reference server's own command, mounted under the harness."""

from __future__ import annotations

from reference_server.cli import serve

__all__ = ["serve"]

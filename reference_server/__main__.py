"""``python -m reference_server``: the same command as ``idem-harness serve``."""

from reference_server.cli import serve

__all__: list[str] = []

serve(prog_name="python -m reference_server")

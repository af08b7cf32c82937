"""The reference server: a real charge service behind a complete idempotency-key layer.

Public surface (everything else is private and may change):

- ``IdempotencyMiddleware`` — the layer, a pure ASGI class, usable around any ASGI app;
- ``create_app`` and ``ServerSettings`` — the whole server as an ASGI app;
- ``FLAWS``, ``Flaw``, ``get_flaw``, ``UnknownFlaw`` — the named flaws;
- ``Behaviour`` — the switches the flaws flip;
- ``reference_server.cli.serve`` — the click command (``python -m reference_server``).
"""

from reference_server._behaviour import Behaviour
from reference_server._middleware import IdempotencyMiddleware
from reference_server._settings import ServerSettings
from reference_server.app import create_app
from reference_server.flaws import FLAWS, Flaw, UnknownFlaw, get_flaw

__all__ = [
    "FLAWS",
    "Behaviour",
    "Flaw",
    "IdempotencyMiddleware",
    "ServerSettings",
    "UnknownFlaw",
    "create_app",
    "get_flaw",
]

for _name in ("Behaviour", "IdempotencyMiddleware", "ServerSettings", "Flaw", "UnknownFlaw"):
    globals()[_name].__module__ = "reference_server"

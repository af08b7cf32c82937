"""A line a person can paste to send the request behind a finding again."""

from __future__ import annotations

import shlex

from harness._history import Event
from harness._target import Target

__all__ = ["curl_for"]


def curl_for(invoke: Event, target: Target, base_url: str) -> str:
    """``curl`` for one recorded invocation, headers and body exactly as the harness sent them."""
    parts = ["curl", "-i", "-X", invoke.method or target.endpoint.method,
             f"{base_url.rstrip('/')}{invoke.path or target.endpoint.path}"]
    if invoke.key_header is not None:
        parts += ["-H", f"{target.key.header}: {invoke.key_header}"]
    if invoke.tenant is not None and target.tenant is not None:
        parts += ["-H", f"{target.tenant.header}: "
                  + target.tenant.format.replace("{tenant}", invoke.tenant)]
    parts += ["-H", "Content-Type: application/json", "--data-raw", invoke.body or ""]
    return shlex.join(parts)

"""Named bundles of settings, chosen once per run: ``dev``, ``ci`` and ``train``.

Like Hypothesis's settings profiles: registered here, selected by ``IDEM_PROFILE`` or
``--idem-profile``, and ``ci`` is the default whenever ``CI=true``.  The one rule that matters
most lives here: in CI a missing service fails the run instead of skipping.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from harness._errors import UsageError

__all__ = ["Profile", "get_profile", "in_ci", "profile_names"]


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    require_services: bool
    explore_max_examples: int
    narrate: bool
    description: str


_PROFILES = {
    p.name: p
    for p in (
        Profile("dev", False, 60, False, "local work: missing services skip with the reason"),
        Profile("ci", True, 30, False, "CI gate: a missing service fails, budgets are small"),
        Profile("train", False, 60, True, "training: narrate every step for an audience"),
    )
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def profile_names() -> list[str]:
    return sorted(_PROFILES)


def get_profile(name: str | None = None) -> Profile:
    """The named profile, else ``IDEM_PROFILE``, else ``ci`` under CI and ``dev`` otherwise."""
    chosen = name or os.environ.get("IDEM_PROFILE") or ("ci" if in_ci() else "dev")
    try:
        return _PROFILES[chosen]
    except KeyError:
        raise UsageError(
            f"unknown profile {chosen!r}; choose one of {', '.join(profile_names())}"
        ) from None

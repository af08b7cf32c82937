"""Option checks the server's and the consumer's commands share."""

from __future__ import annotations

from collections.abc import Callable

import click

from reference_server.flaws import UnknownFlaw

__all__ = ["FlawCheck", "checked_flaw"]

FlawCheck = Callable[[click.Context, click.Parameter, str | None], str | None]


def checked_flaw(lookup: Callable[[str], object]) -> FlawCheck:
    """A ``--flaw`` callback: an unknown name is a usage error that lists the known ones
    (``lookup`` raises ``UnknownFlaw`` saying so), before anything starts."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            try:
                lookup(value)
            except UnknownFlaw as exc:
                raise click.BadParameter(str(exc)) from None
        return value

    return check

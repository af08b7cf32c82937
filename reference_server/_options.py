"""Option checks the server's and the consumer's commands share."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import click

from reference_server.flaws import FlawClash, UnknownFlaw

__all__ = ["FlawCheck", "checked_flaws"]

FlawCheck = Callable[[click.Context, click.Parameter, Sequence[str]], tuple[str, ...]]


def checked_flaws(combine: Callable[[Sequence[str]], object]) -> FlawCheck:
    """A repeatable ``--flaw`` callback: an unknown name, or flaws that cannot be combined, is
    a usage error that says which and why (``combine`` raises ``UnknownFlaw`` or
    ``FlawClash``), before anything starts."""

    def check(ctx: click.Context, param: click.Parameter,
              value: Sequence[str]) -> tuple[str, ...]:
        try:
            combine(value)
        except (UnknownFlaw, FlawClash) as exc:
            raise click.BadParameter(str(exc)) from None
        return tuple(value)

    return check

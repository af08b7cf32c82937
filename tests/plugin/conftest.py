"""The plugin's tests run an inner pytest session (``pytester``) against the reference server,
sharing the suite's Toxiproxy so CI's service rules apply to them too.  Sessions that run a
target run in a subprocess: an in-process inner session re-imports modules (pytester restores
``sys.modules`` after each), and an httpx that meets another httpcore's exceptions cannot map
them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.services._toxiproxy import ToxiproxyServer
from harness.targets._loader import BUILTIN_TARGETS


@pytest.fixture
def gate(pytester: pytest.Pytester, toxiproxy_server: ToxiproxyServer,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.Pytester]:
    """A pytester whose inner runs find the session's Toxiproxy and know nothing of CI."""
    monkeypatch.setenv("TOXIPROXY_URL", toxiproxy_server.url)
    monkeypatch.delenv("IDEM_PROFILE", raising=False)
    monkeypatch.delenv("CI", raising=False)
    yield pytester


def flawed_reference(directory: Path, flaw: str) -> Path:
    """The reference target file, started with ``--flaw`` and without its clock hook, so one
    file gives a failing scenario and a scenario that does not apply."""
    text = (BUILTIN_TARGETS / "reference.toml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith("clock = ")]
    text = "\n".join(lines).replace('name = "reference-server"', f'name = "reference-{flaw}"')
    text = text.replace('"--test-faults"]', f'"--test-faults", "--flaw", "{flaw}"]')
    path = directory / f"reference-{flaw}.toml"
    path.write_text(text)
    return path

"""The consumer corpus's fixtures: where each consumer's target file is, its named flaws, and a
check that what it runs on is installed (``install-all``): outside CI a missing piece skips,
saying why; under ``CI=true`` it fails (tests.missing)."""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.missing import missing

CORPUS = Path(__file__).parent
TARGETS = CORPUS / "targets"
CONSUMERS = CORPUS / "consumers"
#: What each consumer needs installed, as the stamp its install script leaves.
STAMPS = {
    "kombu_inbox": CONSUMERS / "kombu_inbox" / ".venv" / ".installed",
    "faststream_redis": CONSUMERS / "faststream_redis" / ".venv" / ".installed",
    "node_acm": CONSUMERS / "node_acm" / "node_modules" / ".installed",
    "go_group": CONSUMERS / "go_group" / ".bin" / ".installed",
}


@dataclass(frozen=True)
class Flaw:
    consumer: str
    name: str
    scenario: str
    properties: tuple[str, ...]


def flaws() -> tuple[Flaw, ...]:
    """The named flaws of ``flaws.toml``, each with the scenario and properties that catch it."""
    data = tomllib.loads((CORPUS / "flaws.toml").read_text(encoding="utf-8"))
    return tuple(Flaw(f["consumer"], f["name"], f["scenario"], tuple(f["properties"]))
                 for f in data["flaw"])


def require(name: str) -> Path:
    """The consumer's target file, once its install is there (redis-server too, for those that
    keep their keys in Redis)."""
    target = TARGETS / f"{name}.toml"
    if not STAMPS[name].exists():
        missing(f"corpus consumer {name!r} is not installed: run "
                f"tests/consumer_corpus/install-all (make setup does)", kind="corpus consumer")
    if name in ("faststream_redis", "node_acm") and shutil.which("redis-server") is None:
        missing("redis-server is missing: apt-get install -y redis-server", kind="tool")
    return target

"""The corpus's fixtures: where each service's target file is, and a check that the service
and what it runs on (uvicorn for the ASGI ones, redis-server for the Redis one) are really
there: outside CI a missing piece skips, saying why; under ``CI=true`` it fails
(tests.missing)."""

from __future__ import annotations

import importlib.util
import shutil
import tomllib
from collections.abc import Sequence
from pathlib import Path

import pytest

from harness._target import Target
from harness.targets._loader import load_target
from tests.missing import missing

CORPUS = Path(__file__).parent
TARGETS = CORPUS / "targets"
SERVICES = CORPUS / "services"


def service_module(target_file: Path) -> Path:
    """The module a corpus target file starts (``-m tests.corpus.services.NAME``): usually the
    file's own name, but one service may be described by several files (memory_clock_blind
    is memory_clock without a way to read its clock)."""
    try:
        command = tomllib.loads(target_file.read_text(encoding="utf-8"))["start"]["command"]
        dotted = command[command.index("-m") + 1]
    except (OSError, tomllib.TOMLDecodeError, KeyError, ValueError, IndexError):
        return SERVICES / f"{target_file.stem}.py"
    return SERVICES / f"{dotted.rsplit('.', 1)[-1]}.py"


def corpus_target(name: str, flaw: str | Sequence[str] | None = None) -> Target:
    """The service's target file, loaded; started with ``--flaw`` for each flaw given (one
    name, or several switched on at once).  A service whose module or target file is absent
    is missing (a failure under CI)."""
    target_file = TARGETS / f"{name}.toml"
    module = service_module(target_file)
    if not target_file.exists() or not module.exists():
        missing(f"corpus service {name!r} is missing: expected {module} and {target_file}",
                kind="corpus service")
    if '"redis-server"' in module.read_text() and shutil.which("redis-server") is None:
        missing(f"corpus service {name!r} needs redis-server: apt-get install -y redis-server",
                kind="tool")
    if "serve_asgi" in module.read_text() and importlib.util.find_spec("uvicorn") is None:
        missing(f"corpus service {name!r} needs uvicorn: .venv/bin/pip install uvicorn",
                kind="package")
    target = load_target(target_file)
    flaws = [flaw] if isinstance(flaw, str) else list(flaw or [])
    args = [arg for f in flaws for arg in ("--flaw", f)]
    return target.with_start_args(args) if args else target


@pytest.fixture()
def report_dir(tmp_path: Path) -> Path:
    return tmp_path / "report"

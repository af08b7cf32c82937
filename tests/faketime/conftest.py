"""Fixtures for the clock moved from outside: libfaketime and its shim ready (scripts/
ensure-faketime, fast once done), the tools each small service runs on, and the target files.
A missing piece skips outside CI, saying how to get it, and fails under ``CI=true``."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from harness._target import Target
from harness.services._paths import project_root
from harness.targets._loader import load_target, parse_target
from tests.missing import missing

HERE = Path(__file__).parent
TARGETS = HERE / "targets"
STATIC_CLOCK = HERE / "services" / "static-clock"


@pytest.fixture(scope="session")
def faketime_ready() -> None:
    done = subprocess.run([str(project_root() / "scripts" / "ensure-faketime")],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        missing(f"libfaketime or its shim is not ready:\n{done.stderr.strip()}", kind="tool")


def needs(tool: str, install: str) -> None:
    if shutil.which(tool) is None:
        missing(f"{tool} is not installed: {install}", kind="tool")


@pytest.fixture()
def python_target(faketime_ready: None) -> Target:
    needs("redis-server", "apt-get install -y redis-server")
    return load_target(TARGETS / "python-redis.toml")


@pytest.fixture()
def node_target(faketime_ready: None) -> Target:
    needs("node", "apt-get install -y nodejs")
    return load_target(TARGETS / "node-memory.toml")


@pytest.fixture(scope="session")
def static_binary() -> Path:
    """The static Go service, built once per source version under .tools/ (a cold build
    compiles Go's runtime: seconds; a cached one costs nothing)."""
    needs("go", "install Go >= 1.22 (https://go.dev/dl/)")
    source = (STATIC_CLOCK / "main.go").read_bytes() + (STATIC_CLOCK / "go.mod").read_bytes()
    binary = (project_root() / ".tools" / "test-builds" /
              f"static-clock-{hashlib.sha256(source).hexdigest()[:12]}")
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        partial = binary.with_suffix(".tmp")
        subprocess.run(["go", "build", "-o", str(partial), "."], cwd=STATIC_CLOCK, check=True,
                       env={**os.environ, "CGO_ENABLED": "0"}, timeout=300)
        partial.replace(binary)
    return binary


@pytest.fixture()
def static_target(faketime_ready: None, static_binary: Path) -> Target:
    path = TARGETS / "go-static.toml"
    data = tomllib.loads(path.read_text())
    data["start"]["command"][0] = str(static_binary)
    return parse_target(data, source=str(path))

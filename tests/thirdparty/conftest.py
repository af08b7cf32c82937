"""The third-party example targets, installed (fast when already done: each install script
keeps a stamp) before their tests.  A missing tool (node, npm, redis-server) or an unreachable
registry skips those tests outside CI, saying why; under ``CI=true`` it fails them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.missing import missing

EXAMPLES = Path(__file__).parents[2] / "examples" / "targets"
INSTALLERS = {
    "express-idempotency": [str(EXAMPLES / "express-idempotency" / "install.sh")],
    "django-idempotency-key": [str(EXAMPLES / "django-idempotency-key" / "install.sh"),
                               "--python", sys.executable],
}


def install(name: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(INSTALLERS[name], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="session")
def examples_installed() -> list[Path]:
    """Every HTTP example installed; their target files."""
    for name in INSTALLERS:
        done = install(name)
        if done.returncode != 0:
            problem = f"cannot install the {name} example:\n{done.stderr.strip()}"
            missing(problem, kind="tool")
    # The HTTP examples: the Celery consumer examples have tests of their own (test_celery.py).
    return sorted(EXAMPLES / f"{name}.toml" for name in INSTALLERS)

"""Fixtures for the report tests: a real headless Chromium driven by Playwright, and one real
training demo typed at the command line, whose pages the browser tests open.

Chromium is Debian's package (``scripts/ensure-chromium``, called by ``make setup``); Playwright
only drives it and never downloads a browser.  Outside CI a missing Chromium skips the browser
tests with the fix; under ``CI=true`` it fails them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, sync_playwright

from harness.services._toxiproxy import ToxiproxyServer
from tests.missing import missing

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
#: Screenshots land here, beside the test output (git-ignored).
OUTPUT = Path(__file__).resolve().parents[2] / "test-output" / "reports"
DEMO_SEED = 20240607


def chromium_path() -> str | None:
    """``IDEM_CHROMIUM``, else Debian's ``chromium`` on PATH."""
    return os.environ.get("IDEM_CHROMIUM") or shutil.which("chromium")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    """One headless Chromium with a fresh profile for the module that uses it.

    Not for the session: Playwright's sync API keeps an asyncio loop running in the main
    thread while it is open, and every later ``asyncio.run`` in the same worker would fail."""
    executable = chromium_path()
    if executable is None:
        message = ("chromium is missing: run `make setup` (scripts/ensure-chromium installs "
                   "Debian's chromium as root) or set IDEM_CHROMIUM")
        missing(message, kind="browser")
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=executable, args=CHROMIUM_FLAGS, headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class Opened:
    """A page the browser loaded, with every console error and uncaught exception it raised."""

    page: Page
    errors: list[str] = field(default_factory=list)

    def screenshot(self, name: str) -> Path:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        path = OUTPUT / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def open_page(browser: BrowserContext) -> Iterator[Callable[[Path], Opened]]:
    opened: list[Opened] = []

    def open_(path: Path) -> Opened:
        page = browser.new_page()
        result = Opened(page)
        page.on("console", lambda message: result.errors.append(message.text)
                if message.type == "error" else None)
        page.on("pageerror", lambda error: result.errors.append(str(error)))
        page.goto(path.resolve().as_uri(), wait_until="load")
        opened.append(result)
        return result

    yield open_
    for each in opened:
        each.page.close()


@dataclass(frozen=True)
class DemoRun:
    directory: Path
    process: subprocess.CompletedProcess[str]


@pytest.fixture(scope="session")
def demo_run(toxiproxy_server: ToxiproxyServer,
             tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    """``idem-harness demo server-generated-key`` as a trainer types it (sharing the session's
    Toxiproxy through TOXIPROXY_URL): narrated, judged, and written as pages."""
    directory = tmp_path_factory.mktemp("demo") / "server-generated-key"
    command = [str(Path(sys.executable).with_name("idem-harness")), "demo",
               "server-generated-key", "--report-dir", str(directory), "--seed", str(DEMO_SEED)]
    process = subprocess.run(
        command, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "TOXIPROXY_URL": toxiproxy_server.url, "COLUMNS": "160"},
    )
    return DemoRun(directory, process)

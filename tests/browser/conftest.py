"""Fixtures for the playground browser tests: Debian's chromium via Playwright, servers on loopback threads."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.server_thread import ServerThread

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if os.path.exists(CHROMIUM):
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is not installed (Debian package 'chromium'; `make system-deps`)")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


# Package scope, not session: sync_playwright keeps an asyncio loop running in this thread while it is open, and
# every asyncio.run() / async test collected after tests/browser would fail with "a loop is already running".
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def fake() -> Iterator[Any]:
    from .fake_gateway import FakeGateway

    gw = FakeGateway()
    with ServerThread(gw.app) as srv:
        gw.url = srv.url  # type: ignore[attr-defined]
        yield gw


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    # bypass_csp: Playwright's wait_for_function evaluates its string in the page, which the playground's CSP
    # (server/web_security.py) rightly forbids. test_playground_csp.py loads the page under the real CSP.
    context = browser.new_context(viewport={"width": 1440, "height": 960}, bypass_csp=True)
    context.set_default_timeout(10_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.add_init_script("window.__xss = false;")
    yield pg
    context.close()
    assert not errors, f"uncaught page errors: {errors}"


def screenshot(pg: Any, name: str) -> None:
    """Take a screenshot of a main state. Written to docs/img only with RESPSTREAM_SCREENSHOTS=1 (to refresh the
    README's pictures); otherwise to a temporary folder, so a test run never dirties the work tree."""
    refresh = os.environ.get("RESPSTREAM_SCREENSHOTS") == "1"
    folder = DOCS_IMG if refresh else Path(tempfile.gettempdir()) / "respstream-shots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    pg.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 1000, f"screenshot {path} is empty"

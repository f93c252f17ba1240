"""Fixtures for the playground browser tests: Debian's chromium via Playwright, servers on loopback threads."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
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
    # (server/http/web_security.py) rightly forbids. test_playground_csp.py loads the page under the real CSP.
    context = browser.new_context(viewport={"width": 1440, "height": 960}, bypass_csp=True)
    context.set_default_timeout(10_000)
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    pg.add_init_script("window.__xss = false; window.__csp = [];"
                       " document.addEventListener('securitypolicyviolation',"
                       " (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));")
    yield pg
    try:
        csp = pg.evaluate("window.__csp || []")
    except Exception:  # the page was closed or navigated away by the test
        csp = []
    context.close()
    assert not errors, f"uncaught page errors: {errors}"
    assert not csp, f"Content-Security-Policy violations: {csp}"


def screenshot(pg: Any, name: str) -> None:
    """Take a screenshot of a main state. Written to docs/img only with RESPSTREAM_SCREENSHOTS=1 (to refresh the
    README's pictures); otherwise to a temporary folder, so a test run never dirties the work tree."""
    refresh = os.environ.get("RESPSTREAM_SCREENSHOTS") == "1"
    folder = DOCS_IMG if refresh else Path(tempfile.gettempdir()) / "respstream-shots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    pg.screenshot(path=str(path), full_page=False)
    assert path.stat().st_size > 1000, f"screenshot {path} is empty"


Gateway = Callable[..., AbstractContextManager[str]]


@pytest.fixture()
def gateway() -> Iterator[Gateway]:
    """Start the real gateway (create_app) with a SIMULATED scripted upstream: ``with gateway(spec) as url``."""
    from .gateway import gateway_app

    @contextmanager
    def start(upstream: str, dialect: str = "platform") -> Iterator[str]:
        with ServerThread(gateway_app(upstream, dialect=dialect), ws="websockets-sansio") as srv:
            yield srv.url

    yield start


def open_page(pg: Any, url: str, *, models: bool = True) -> None:
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready=true]")
    if models:  # the model list comes from GET /v1/models
        pg.wait_for_function("document.querySelectorAll('#model option').length > 1")


def wait_status(pg: Any, status: str, timeout: float = 15_000) -> None:
    pg.wait_for_function("s => window.__playground && window.__playground.status === s", arg=status,
                         timeout=timeout)


def tool_turn(pg: Any, url: str, prompt: str, tool: str) -> dict[str, Any]:
    """Sends ``prompt`` with the gateway tool ``tool`` ticked, waits for the turn to complete, and returns the
    response as the gateway at ``url`` stored it."""
    pg.fill("#prompt", prompt)
    pg.check(f"input[name=tool][value={tool}]")
    pg.click("#send")
    wait_status(pg, "completed")
    rid = pg.evaluate("window.__playground.responseId")
    stored: dict[str, Any] = httpx.get(f"{url}/v1/responses/{rid}", timeout=5).json()
    return stored


def send_to_an_unknown_model(pg: Any) -> None:
    """Adds ``no-such-model`` to the page's model list (the gateway does not serve it), sends to it and waits for
    the playground's error state."""
    pg.evaluate("document.getElementById('model').append(new Option('no-such-model', 'no-such-model'))")
    pg.select_option("#model", "no-such-model")
    pg.click("#send")
    wait_status(pg, "error")


def wait_turns(pg: Any, n: int, status: str = "completed") -> None:
    pg.wait_for_function("([n, s]) => window.__playground && window.__playground.turns === n"
                         " && window.__playground.status === s", arg=[n, status], timeout=15_000)


# axe-core (MPL-2.0) is TEST data only: fetched from npm into a cache folder, never shipped or served.
AXE_VERSION = "4.14.1"
AXE_CACHE = Path(os.environ.get("RESPSTREAM_TEST_CACHE", Path.home() / ".cache" / "respstream-test"))
AXE_DIR = AXE_CACHE / f"axe-{AXE_VERSION}"


def axe_script() -> Path | None:
    """axe.min.js from the cache, installed with npm on first use (``make axe`` does the same)."""
    js = AXE_DIR / "node_modules" / "axe-core" / "axe.min.js"
    if not js.exists() and shutil.which("npm"):
        AXE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", str(AXE_DIR),
                        f"axe-core@{AXE_VERSION}"], capture_output=True, timeout=300, check=False)
    return js if js.exists() else None

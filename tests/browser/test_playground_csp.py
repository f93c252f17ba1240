"""Issue 13 item 16: the playground works under its own Content-Security-Policy (server/http/web_security.py), in a
REAL headless chromium with CSP enforced (no bypass), against the real gateway app and the SIMULATED scripted
upstream: it loads, lists models, streams an answer, and the browser reports no CSP violation."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import ServerThread
from .gateway import gateway_app

pytestmark = pytest.mark.browser


def test_playground_runs_under_its_csp(browser: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900})  # CSP enforced
    context.set_default_timeout(15_000)
    page = context.new_page()
    console: list[str] = []
    page.on("console", lambda msg: console.append(msg.text))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        with ServerThread(gateway_app("scripted:12?delay_ms=20")) as srv:
            response = page.goto(srv.url + "/")
            assert response is not None and "frame-ancestors 'none'" in response.headers["content-security-policy"]
            page.locator("body[data-ready=true]").wait_for(state="attached")
            page.locator("#model option").nth(1).wait_for(state="attached")  # GET /v1/models went through
            page.click("#send")
            page.locator("#answer", has_text="quick").wait_for()  # the stream arrived and was rendered
    finally:
        context.close()
    violations = [m for m in console if "Content Security Policy" in m]
    assert violations == [] and errors == [], (violations, errors)

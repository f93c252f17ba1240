"""README pictures from the REAL embedded model (the default, Qwen2.5-Coder-1.5B, via xllamacpp): a two-turn
conversation and view code.

Run by `make screenshots` (RESPSTREAM_SCREENSHOTS=1); skipped otherwise, because a real generation on a shared
machine takes long and the behaviour it shows is covered by the faster tests beside it."""

from __future__ import annotations

import os
from typing import Any

import pytest

from .conftest import Gateway, open_page, screenshot

pytestmark = pytest.mark.browser


@pytest.mark.skipif(os.environ.get("RESPSTREAM_SCREENSHOTS") != "1", reason="screenshots only (make screenshots)")
def test_embedded_model_conversation_pictures(browser: Any, gateway: Gateway) -> None:
    pytest.importorskip("xllamacpp")
    context = browser.new_context(viewport={"width": 1440, "height": 960}, bypass_csp=True)  # harness eval
    context.set_default_timeout(180_000)
    page = context.new_page()
    try:
        with gateway("embedded") as url:
            open_page(page, url, models=False)
            page.fill("#max-tokens", "300")
            page.fill("#prompt", "In two sentences: what is a server-sent event?")
            page.click("#send")
            page.wait_for_function("window.__playground.turns === 1 && "
                                   "['completed', 'incomplete'].includes(window.__playground.status)")
            page.fill("#prompt", "Show a tiny Python client that reads those events with requests. Code only.")
            page.click("#send")
            page.wait_for_function("window.__playground.turns === 2 && "
                                   "['completed', 'incomplete'].includes(window.__playground.status)")
            state = page.evaluate("window.__playground")
            assert state["finalText"].strip() and state["violations"] == []
            assert state["request"]["previous_response_id"]
            screenshot(page, "conversation")
            page.emulate_media(color_scheme="dark")
            screenshot(page, "conversation-dark")
            page.emulate_media(color_scheme="light")
            page.click("#view-code")
            screenshot(page, "view-code")
    finally:
        context.close()

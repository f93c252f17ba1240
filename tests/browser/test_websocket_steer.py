"""The playground's Steer action over WebSocket (real gateway, SIMULATED paced scripted upstream, Debian's chromium):
while a response streams, the composer's text goes out as ``response.steer``; the response ends ``incomplete``
(steered) and stays in the thread; the successor streams on the same socket as a new turn, to ``completed``."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Gateway, open_page, wait_turns

pytestmark = pytest.mark.browser


def test_steer_a_streaming_response(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:300?delay_ms=20", dialect="openai") as url:
        open_page(page, url)
        page.check("#websocket")
        # shown by the page's script once WebSocket mode is on: wait for it (a loaded machine runs that script late)
        page.wait_for_selector("#steer", state="visible", timeout=10_000)
        page.click("#send")
        page.wait_for_function("window.__playground && window.__playground.events > 5 "
                               "&& !document.getElementById('steer').disabled", timeout=15_000)
        first = page.evaluate("window.__playground.responseId")
        page.fill("#prompt", "Now talk about owls.")
        page.click("#steer")
        wait_turns(page, 2, "completed")
        state = page.evaluate("window.__playground")
        assert state["responseId"] != first and state["violations"] == []
        assert page.evaluate("document.getElementById('current-user').textContent") == "Now talk about owls."
        stored = page.evaluate("fetch('/v1/responses/' + arguments[0]).then(r => r.json())".replace(
            "arguments[0]", repr(first)))
    assert stored["status"] == "incomplete" and stored["incomplete_details"] == {"reason": "steered"}
    assert page.is_disabled("#steer")

"""Item 5: errors people understand. Each failure before a stream gets its own message and action, and none of
them is reported as a protocol violation (there was no stream to check)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Gateway, open_page, screenshot, send_to_an_unknown_model, wait_status
from .fake_gateway import Script

pytestmark = pytest.mark.browser


def test_unreachable_gateway(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:3") as url:
        open_page(page, url)
    # The gateway is gone now (its server thread stopped): the request never starts.
    page.click("#send")
    wait_status(page, "unreachable")
    assert page.inner_text("#error-title") == "Gateway unreachable"
    assert page.inner_text("#error-code") == "unreachable"
    assert url.split("//", 1)[1] in page.inner_text("#error-message")
    assert "respstream serve" in page.inner_text("#error-action")
    assert page.evaluate("window.__playground.violations") == []  # no lifecycle.no_terminal invented
    assert page.evaluate("window.__playground.events") == 0
    screenshot(page, "gateway-down")


@pytest.mark.parametrize(("status", "code", "headers", "title", "action"), [
    (401, "invalid_api_key", {}, "API key needed", "Enter your key in the API key section"),
    (403, "forbidden", {}, "Not allowed", "Use a key with access"),
    (429, "rate_limited", {"Retry-After": "7"}, "Rate limited", "Try again in 7 s."),
    (503, "overloaded", {"Retry-After": "3"}, "Gateway busy", "Try again in 3 s."),
    (400, "invalid_value", {}, "Request refused", "Fix the request"),
])
def test_http_errors_each_get_their_message_and_action(page: Any, fake: Any, status: int, code: str,
                                                       headers: dict[str, str], title: str, action: str) -> None:
    fake.script = Script(http_error=(status, code, headers))
    open_page(page, fake.url)
    assert not page.locator("#key-section").evaluate("d => d.open")
    page.click("#send")
    wait_status(page, "error")
    assert page.inner_text("#error-title") == title
    assert page.inner_text("#error-code") == code
    assert page.inner_text("#error-action").startswith(action)
    assert f"simulated {status} {code}" in page.inner_text("#error-message")
    assert page.evaluate("window.__playground.violations") == []
    if status == 401:
        # The action is taken for the user: the API-key section opens with the field focused.
        assert page.locator("#key-section").evaluate("d => d.open")
        assert page.evaluate("document.activeElement.id") == "api-key"
    if "Retry-After" in headers:
        # Send waits out Retry-After, counting down.
        assert page.is_disabled("#send")
        assert page.inner_text("#send").startswith("Send (")


def test_unknown_model_on_the_real_gateway(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:5") as url:
        open_page(page, url)
        send_to_an_unknown_model(page)
        assert page.inner_text("#error-title") == "Unknown model"
        assert page.inner_text("#error-code") == "model_not_found"
        assert "Pick a model from the list" in page.inner_text("#error-action")
        # The list was refreshed from /v1/models: the bogus entry is gone.
        page.wait_for_function("![...document.querySelectorAll('#model option')]"
                               ".some(o => o.value === 'no-such-model')")
        assert page.evaluate("window.__playground.violations") == []

"""The playground against the real gateway (create_app) with the SIMULATED scripted upstream, in chromium."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from .conftest import Gateway, screenshot, send_to_an_unknown_model, tool_turn, wait_status
from .conftest import open_page as open_gateway_page

pytestmark = pytest.mark.browser

WORDS = ("The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "and", "runs", "far", "away.")


def scripted_text(n: int) -> str:
    """What ``scripted:N`` streams (its documented word cycle)."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(n))


def open_page(page: Any, url: str) -> None:
    open_gateway_page(page, url)


def answer_len(page: Any) -> int:
    n: int = page.evaluate("document.getElementById('answer').textContent.length")
    return n


def test_gateway_answer_streams_progressively(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:40?delay_ms=50") as url:
        open_page(page, url)
        assert "scripted" in page.locator("#model option").all_inner_texts()
        page.click("#send")
        page.wait_for_function("document.getElementById('answer').textContent.length > 10")
        first = answer_len(page)
        first_status = page.evaluate("window.__playground.status")
        page.wait_for_function(f"document.getElementById('answer').textContent.length > {first + 20}")
        second = answer_len(page)
        page.locator("#routing").wait_for(state="visible")
        screenshot(page, "gateway-streaming")
        wait_status(page, "completed")
        assert first_status == "streaming"
        assert first < second < answer_len(page)
        state = page.evaluate("window.__playground")
        assert state["finalText"] == state["streamedText"] == scripted_text(40)
        assert state["violations"] == []
        assert page.inner_text("#routing-model") == "scripted"
        assert page.inner_text("#routing-category") != ""
        assert page.inner_text("#framing") == "event: message"
        assert "tokens" in page.inner_text("#usage")


@pytest.mark.parametrize("dialect", ["platform", "openai"])
def test_gateway_tool_call_card_completes(page: Any, gateway: Gateway, dialect: str) -> None:
    # platform: a function_call item carrying output and status; openai: an mcp_call item (hosted-tool shape).
    with gateway("scripted:6?delay_ms=20&tool=calculator", dialect=dialect) as url:
        open_page(page, url)
        stored = tool_turn(page, url, "What is 2+2?", "calculator")
        kind = "function_call" if dialect == "platform" else "mcp_call"
        call = next(item for item in stored["output"] if item["type"] == kind)
        card = page.locator(".tool-card")
        assert card.count() == 1
        # The card ends in the server's final status for the call, with its output as the preview.
        assert call["status"] in ("completed", "failed")
        assert card.get_attribute("data-status") == call["status"]
        assert card.locator(".tool-status").inner_text() == call["status"]
        assert card.locator(".tool-name").inner_text() == "calculator"
        output = call.get("output") or call.get("error")
        assert card.locator(".tool-output").inner_text() == output[:600]
        assert card.locator(".tool-args").inner_text().startswith("{")
        assert page.evaluate("window.__playground.violations") == []
        # The scripted (SIMULATED) answer does not state the calculator's 4: the grounded-facts rewrite step
        # annotates the final text with the result (server/responses/grounded_answer.py).
        assert page.evaluate("window.__playground.finalText") == scripted_text(6) + "\n\n(Calculator: 2+2 = 4.)"
        if dialect == "platform":
            screenshot(page, "gateway-tool-call")


def test_gateway_upstream_failure_shows_banner(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:8?delay_ms=20&fail_at=3") as url:
        open_page(page, url)
        page.click("#send")
        wait_status(page, "error")
        assert page.locator("#error-banner").is_visible()
        assert page.inner_text("#error-code") == "upstream_error"
        assert page.evaluate("window.__playground.streamedText") == scripted_text(3)
        assert page.evaluate("window.__playground.violations") == []


@pytest.mark.parametrize("dialect", ["platform", "openai"])
def test_gateway_resume_after_disconnect(page: Any, gateway: Gateway, dialect: str) -> None:
    n = 60
    with gateway(f"scripted:{n}?delay_ms=30", dialect=dialect) as url:
        open_page(page, url)
        page.check("#background")
        page.click("#send")
        page.wait_for_function("document.getElementById('answer').textContent.length > 40")
        page.click("#disconnect")
        wait_status(page, "disconnected")
        seen = page.evaluate("window.__playground.streamedText")
        assert 0 < len(seen) < len(scripted_text(n))
        page.click("#resume")
        wait_status(page, "completed")
        state = page.evaluate("window.__playground")
        assert state["streamedText"] == state["finalText"] == scripted_text(n)
        assert state["violations"] == []
        seqs = [r["seq"] for r in page.evaluate("window.__timelineRows()") if r["seq"] != ""]
        assert seqs == list(range(len(seqs))), "a sequence number was repeated or skipped across the resume"
        stored = httpx.get(f"{url}/v1/responses/{state['responseId']}", timeout=5).json()
        assert stored["status"] == "completed"
        if dialect == "platform":
            screenshot(page, "resume")
            page.emulate_media(color_scheme="dark")
            screenshot(page, "resume-dark")


def test_gateway_token_limit_shows_incomplete(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:30?delay_ms=5") as url:
        open_page(page, url)
        page.fill("#max-tokens", "5")
        page.click("#send")
        wait_status(page, "incomplete")
        assert page.locator("#error-banner").is_visible()
        assert page.get_attribute("#error-banner", "data-kind") == "warning"
        assert page.inner_text("#error-code") == "incomplete"
        assert "max_output_tokens" in page.inner_text("#error-message")
        assert page.evaluate("window.__playground.finalText") == scripted_text(5)


def test_gateway_http_error_before_streaming_shows_banner(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:5") as url:
        open_page(page, url)
        send_to_an_unknown_model(page)
        assert page.inner_text("#error-code") == "model_not_found"
        assert page.inner_text("#error-message") != ""
        assert page.evaluate("window.__playground.streamedText") == ""

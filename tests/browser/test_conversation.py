"""Item 1: conversations. Turns continue with previous_response_id against the real gateway (SIMULATED scripted
upstream); edit-and-resend and regenerate replace the last turn; new chat starts afresh; threads survive a reload."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from .conftest import Gateway, open_page, wait_turns
from .test_gateway_playground import scripted_text

pytestmark = pytest.mark.browser


def stored(url: str, rid: str) -> dict[str, Any]:
    """The stored response once it has ended (the page may see the next response's id before its terminal)."""
    deadline = time.monotonic() + 10
    while True:
        reply = httpx.get(f"{url}/v1/responses/{rid}", timeout=5)
        body: dict[str, Any] = reply.json()
        if reply.status_code == 200 and body.get("status") not in ("queued", "in_progress"):
            return body
        assert time.monotonic() < deadline, f"GET {rid}: {reply.status_code} {reply.text[:500]}"
        time.sleep(0.1)


def send(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.click("#send")


def test_two_turn_thread_continues_the_first_answer(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:12?delay_ms=5") as url:
        open_page(page, url)
        send(page, "First question")
        wait_turns(page, 1)
        first = page.evaluate("window.__playground.responseId")
        assert page.evaluate("window.__playground.request").get("previous_response_id") is None
        send(page, "Second question")
        wait_turns(page, 2)
        second = page.evaluate("window.__playground.responseId")
        assert page.evaluate("window.__playground.request")["previous_response_id"] == first
        # The gateway really continued the first answer: the chain is stored and the second generation's
        # context holds the first turn (more input tokens than the first turn alone).
        one, two = stored(url, first), stored(url, second)
        assert two["previous_response_id"] == first
        assert two["usage"]["input_tokens"] > one["usage"]["input_tokens"]
        # The earlier turn is shown above the live one, with its question and answer.
        past = page.locator("#thread li.turn")
        assert past.count() == 1
        assert past.locator(".bubble.user").inner_text() == "First question"
        assert past.locator(".bubble.assistant").inner_text() == scripted_text(12)
        assert page.inner_text("#current-user") == "Second question"
        assert page.inner_text("#answer") == scripted_text(12)


def test_edit_and_regenerate_replace_the_last_turn(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:6") as url:
        open_page(page, url)
        send(page, "One")
        wait_turns(page, 1)
        first = page.evaluate("window.__playground.responseId")
        send(page, "Two (typo)")
        wait_turns(page, 2)
        page.click("#edit-last")
        assert page.input_value("#prompt") == "Two (typo)"
        page.wait_for_selector("#editing", state="visible", timeout=10_000)  # shown once the edit began
        page.fill("#prompt", "Two")
        page.click("#send")
        wait_turns(page, 2)  # still two turns: the edit replaced the last one
        # The turn count is 2 at once (the edit replaces the turn): wait for the edited answer itself.
        page.wait_for_function("() => window.__playground.request?.input === 'Two' && "
                               "window.__playground.responseId && window.__playground.status === 'completed'")
        edited = page.evaluate("window.__playground")
        assert edited["request"]["input"] == "Two"
        assert edited["request"]["previous_response_id"] == first  # continues turn 1, not the replaced turn
        page.click("#regenerate")
        # Regenerate clears responseId while status still says the last answer completed: wait for the new id.
        page.wait_for_function("id => window.__playground.responseId && window.__playground.responseId !== id && "
                               "window.__playground.status === 'completed'", arg=edited["responseId"])
        regenerated = page.evaluate("window.__playground")
        assert regenerated["turns"] == 2
        assert regenerated["request"]["input"] == "Two"
        assert regenerated["request"]["previous_response_id"] == first
        assert stored(url, regenerated["responseId"])["previous_response_id"] == first


def test_new_chat_and_threads_survive_a_reload(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:4") as url:
        open_page(page, url)
        send(page, "Kept question")
        wait_turns(page, 1)
        page.click("#new-chat")
        assert page.locator("#thread li").count() == 0
        send(page, "Fresh start")
        wait_turns(page, 1)
        assert "previous_response_id" not in page.evaluate("window.__playground.request")
        page.reload()
        page.wait_for_selector("body[data-ready=true]")
        options = page.locator("#thread-select option").all_inner_texts()
        assert any(o.startswith("Kept question") for o in options), options
        assert any(o.startswith("Fresh start") for o in options), options
        # The current thread is restored with its turn; switching shows the other one.
        assert page.locator("#thread .bubble.user").all_inner_texts() == ["Fresh start"]
        kept = page.locator("#thread-select option", has_text="Kept question").get_attribute("value")
        page.select_option("#thread-select", kept)
        assert page.locator("#thread .bubble.user").all_inner_texts() == ["Kept question"]
        # Continuing a restored thread chains to its stored answer.
        last_id = page.evaluate("JSON.parse(localStorage.getItem('respstream.threads'))"
                                ".threads.find(t => t.id === document.getElementById('thread-select').value)"
                                ".turns[0].responseId")
        send(page, "Follow-up")
        wait_turns(page, 2)
        assert page.evaluate("window.__playground.request")["previous_response_id"] == last_id

"""The playground page in a real (Debian) chromium: streaming, tools, safety, errors, resume, timeline.

These run against tests/browser/fake_gateway.py, a simulated gateway that streams scripted events.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import screenshot
from .fake_gateway import Script

pytestmark = pytest.mark.browser

ROUTING = {"model_id": "fake-large", "category": "reasoning", "source": "router",
           "reasoning": "Input asks for an explanation with steps"}
ANSWER_MD = [
    "## Server-sent events\n\n", "A **server-sent event** stream ", "is one long HTTP response: ",
    "each event is a block of `field: value` lines ", "ended by a blank line.\n\n",
    "- `event:` names the kind\n", "- `data:` carries the JSON payload\n", "- `id:` lets a client resume\n\n",
    "Browsers read it with `EventSource`; ", "a `fetch` body reader works for POST.",
]


def open_page(page: Any, fake: Any, script: Script) -> None:
    fake.script = script
    page.goto(fake.url + "/")
    page.wait_for_selector("body[data-ready=true]")


def answer_len(page: Any) -> int:
    n: int = page.evaluate("document.getElementById('answer').textContent.length")
    return n


def wait_status(page: Any, status: str, timeout: float = 10_000) -> None:
    page.wait_for_function("s => window.__playground && window.__playground.status === s", arg=status,
                           timeout=timeout)


def test_answer_streams_progressively_with_routing_badge(page: Any, fake: Any) -> None:
    chunks = [c for c in ANSWER_MD for c in (c[: len(c) // 2], c[len(c) // 2 :])]
    open_page(page, fake, Script(chunks=chunks, delay_ms=120, routing=ROUTING))
    page.click("#send")
    page.wait_for_function("document.getElementById('answer').textContent.length > 20")
    first = answer_len(page)
    status_at_first = page.evaluate("window.__playground.status")
    page.wait_for_function(f"document.getElementById('answer').textContent.length > {first + 30}")
    second = answer_len(page)
    screenshot(page, "streaming")
    wait_status(page, "completed")
    final = answer_len(page)
    assert status_at_first == "streaming"
    assert first < second < final, (first, second, final)
    assert page.inner_text("#routing-model") == "fake-large"
    assert page.inner_text("#routing-category") == "reasoning"
    assert page.locator("#answer h3").inner_text() == "Server-sent events"
    assert page.locator("#answer li").count() == 3
    assert page.evaluate("window.__playground.finalText") == "".join(chunks)
    assert page.evaluate("window.__playground.violations") == []
    assert page.inner_text("#ttft").endswith("ms")
    assert "tok/s" in page.inner_text("#tps")
    assert fake.requests[-1]["stream"] is True


def test_tool_call_card_completes(page: Any, fake: Any) -> None:
    tool = {"name": "calculator", "arguments": '{"expression": "(17 + 25) * 3"}', "output": "126"}
    open_page(page, fake, Script(chunks=["(17 + 25) x 3 ", "= **126**."], delay_ms=40, tool=tool,
                                 routing={**ROUTING, "category": "fast", "reasoning": "short arithmetic"}))
    page.check("input[name=tool][value=calculator]")
    page.fill("#prompt", "What is (17 + 25) * 3?")
    page.click("#send")
    card = page.locator(".tool-card")
    card.locator(".tool-status", has_text="completed").wait_for()
    wait_status(page, "completed")
    assert card.count() == 1
    assert card.get_attribute("data-status") == "completed"
    assert card.locator(".tool-name").inner_text() == "calculator"
    assert '"expression": "(17 + 25) * 3"' in card.locator(".tool-args").inner_text()
    assert card.locator(".tool-output").inner_text() == "126"
    assert fake.requests[-1]["tools"] == [{"type": "calculator"}]
    screenshot(page, "tool-call")


def test_injected_html_is_shown_as_text(page: Any, fake: Any) -> None:
    payload = '<img src=x onerror="window.__xss=true">'
    chunks = ["Look: ", payload[:9], payload[9:], " and [click](javascript:window.__xss=true) ",
              '<script>window.__xss=true</script> **"quoted"**']
    open_page(page, fake, Script(chunks=chunks, final_text="".join(chunks)))
    page.click("#send")
    wait_status(page, "completed")
    assert page.locator("#answer img").count() == 0
    assert page.locator("#answer script").count() == 0
    assert page.locator("#answer a").count() == 0  # javascript: links stay text
    text = page.inner_text("#answer")
    assert payload in text
    assert "<script>" in text
    assert page.evaluate("window.__xss") is False


def test_upstream_failure_shows_error_banner_with_code(page: Any, fake: Any) -> None:
    open_page(page, fake, Script(chunks=["Partial ", "answer ", "then ", "boom"], fail_after=3,
                                 error_code="upstream_unavailable", routing=ROUTING))
    page.click("#send")
    page.locator("#error-banner").wait_for(state="visible")
    wait_status(page, "error")
    assert page.inner_text("#error-code") == "upstream_unavailable"
    assert "Unexpected upstream failure" in page.inner_text("#error-message")
    assert page.evaluate("window.__playground.violations") == []
    screenshot(page, "error-banner")


def test_truncated_stream_shows_banner(page: Any, fake: Any) -> None:
    # The wire stops after the first delta: EOF without a terminal event.
    open_page(page, fake, Script(chunks=["cut ", "off"], wire=[0, 1, 2, 3]))
    page.click("#send")
    wait_status(page, "truncated")
    assert page.inner_text("#error-code") == "truncated"
    assert "lifecycle.no_terminal" in page.evaluate("window.__playground.violations")


def test_resume_after_disconnect_completes_without_duplicates(page: Any, fake: Any) -> None:
    # The fake replays from starting_after; the real gateway's resume is covered in test_gateway_playground.py.
    chunks = [f"word{i} " for i in range(40)]
    open_page(page, fake, Script(chunks=chunks, delay_ms=30))
    page.check("#background")
    page.click("#send")
    page.wait_for_function("document.getElementById('answer').textContent.length > 30")
    page.click("#disconnect")
    wait_status(page, "disconnected")
    cut = page.evaluate("window.__playground.lastSequenceNumber")
    assert 0 < len(page.evaluate("window.__playground.streamedText")) < len("".join(chunks))
    assert page.is_enabled("#resume")
    page.click("#resume")
    wait_status(page, "completed")
    assert page.evaluate("window.__playground.streamedText") == "".join(chunks)
    assert page.evaluate("window.__playground.violations") == []
    # every record, not only the rows the virtual list has rendered
    assert sum("marker" in r["classes"] for r in page.evaluate("window.__timelineRows()")) == 1
    seqs = [r["seq"] for r in page.evaluate("window.__timelineRows()") if r["seq"] != ""]
    assert seqs == list(range(len(seqs))) and cut in seqs
    req = fake.requests[-1]
    assert req["background"] is True and req["store"] is True


def test_rewrite_marker_toggles_streamed_and_final(page: Any, fake: Any) -> None:
    streamed = ["the answer is ", "<think>hm</think> ", "fourty-two"]
    open_page(page, fake, Script(chunks=streamed, final_text="The answer is forty-two.", routing=ROUTING,
                                 reasoning="The user wants the answer; recall it and fix the spelling."))
    page.click("#send")
    wait_status(page, "completed")
    assert page.locator("#rewritten").is_visible()
    assert page.inner_text("#answer") == "The answer is forty-two."
    assert page.locator("#reasoning").is_visible()
    page.click("#reasoning summary")
    page.click("#toggle-streamed")
    # Rendering is batched per animation frame: wait for it rather than reading at once.
    expect(page.locator("#answer")).to_have_text("".join(streamed))
    expect(page.locator("#answer")).to_have_attribute("data-view", "streamed")
    expect(page.locator("#toggle-streamed")).to_have_text("Show final text")
    screenshot(page, "rewritten")
    page.click("#toggle-streamed")
    expect(page.locator("#answer")).to_have_text("The answer is forty-two.")
    # A rewrite announced by response.rewrite.in_progress is not a text.done_mismatch.
    assert page.evaluate("window.__playground.violations") == []


def test_timeline_flags_checker_violations(page: Any, fake: Any) -> None:
    # Events 0..12 (12 = response.completed) plus a keepalive (13) after the terminal. The wire repeats 3 and
    # drops 5 (a delta, so the done text no longer matches the deltas).
    chunks = ["one ", "two ", "three ", "four ", "five "]
    wire = [0, 1, 2, 3, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13]
    open_page(page, fake, Script(chunks=chunks, routing=ROUTING, extra=[{"type": "keepalive"}], wire=wire))
    page.click("#send")
    wait_status(page, "completed")
    codes = page.evaluate("window.__playground.violations")
    assert sorted(codes) == sorted(["sequence.duplicate", "sequence.gap", "text.done_mismatch",
                                    "lifecycle.terminal_not_last"])
    dup = page.locator("#timeline-body li.violation.dropped[data-seq='3']")
    assert dup.count() == 1
    assert "sequence.duplicate" in (dup.get_attribute("data-codes") or "")
    after = page.locator("#timeline-body li[data-seq='13']")
    assert after.get_attribute("data-codes") == "lifecycle.terminal_not_last"
    assert page.locator("#violations li").count() == len(codes)
    assert page.inner_text("#violation-count") == str(len(codes))
    assert page.locator("#timeline-body li.ev").count() == len(wire)
    screenshot(page, "timeline")

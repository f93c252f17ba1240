"""Item 6: search results as cards (title, URL, snippet) and url_citation annotations linked to them."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import pytest

from .conftest import Gateway, open_page, screenshot, tool_turn, wait_status
from .fake_gateway import Script

pytestmark = pytest.mark.browser

RESULTS = [
    {"title": "Server-sent events - HTML Standard", "url": "https://html.spec.whatwg.org/multipage/server-sent-events.html",
     "snippet": "The EventSource interface is used to receive server-sent events."},
    {"title": "Using server-sent events", "url": "https://developer.mozilla.org/docs/Web/API/Server-sent_events",
     "snippet": "Developing a web application that uses server-sent events is straightforward."},
    {"title": "Sneaky", "url": "javascript:window.__xss=true", "snippet": "never a link"},
]
ANSWER = "SSE is one long HTTP response. Browsers read it with EventSource."
CITATIONS = [
    {"type": "url_citation", "url": RESULTS[0]["url"], "title": RESULTS[0]["title"], "start_index": 0,
     "end_index": 30},
    {"type": "url_citation", "url": RESULTS[1]["url"], "title": RESULTS[1]["title"], "start_index": 31,
     "end_index": len(ANSWER)},
]


def test_search_results_are_cards_and_citations_link_to_them(page: Any, fake: Any) -> None:
    fake.script = Script(chunks=[ANSWER[:20], ANSWER[20:]], search=RESULTS, citations=CITATIONS)
    open_page(page, fake.url)
    page.check("input[name=tool][value=web_search]")
    page.click("#send")
    wait_status(page, "completed")
    cards = page.locator("#source-cards li.source-card")
    assert cards.count() == 3
    first = cards.nth(0)
    assert first.locator(".source-title").inner_text() == RESULTS[0]["title"]
    assert first.locator("a.source-title").get_attribute("href") == RESULTS[0]["url"]
    assert first.locator(".source-url").inner_text() == "html.spec.whatwg.org"
    assert first.locator(".source-snippet").inner_text() == RESULTS[0]["snippet"]
    # A result whose URL is not http(s) is shown, never linked.
    assert cards.nth(2).locator("a").count() == 0
    # Citations: a numbered marker after each cited span, pointing at its card.
    marks = page.locator("#answer sup.cite a")
    assert marks.all_inner_texts() == ["[1]", "[2]"]
    assert [marks.nth(i).get_attribute("href") for i in range(2)] == ["#source-1", "#source-2"]
    assert page.inner_text("#answer").replace("[1]", "").replace("[2]", "") == ANSWER
    marks.nth(1).click()
    assert page.evaluate("location.hash") == "#source-2"
    assert page.evaluate("window.__xss") is False
    screenshot(page, "sources")


def test_real_gateway_web_search_results_become_cards(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:6?tool=web_search", dialect="openai") as url:
        open_page(page, url)
        output = tool_turn(page, url, "server-sent events", "web_search")["output"]
        call = next(item for item in output if item["type"] in ("web_search_call", "mcp_call", "function_call"))
        raw = call.get("output")
        try:
            results = json.loads(raw) if isinstance(raw, str) else []
        except json.JSONDecodeError:
            results = []  # the tool failed (its output is an error text): then there are no cards to show
        assert results, f"the embedded search index found nothing: {raw!r}"
        titles = page.locator("#source-cards .source-title").all_inner_texts()
        assert titles == [r["title"] for r in results]
        # Corpus URLs (respstream://…) are shown as text, never as links; http(s) ones are links.
        links = page.locator("#source-cards a.source-title").evaluate_all("as => as.map(a => a.href)")
        assert links == [r["url"] for r in results if r["url"].startswith(("http://", "https://"))]


def test_marker_citations_replace_the_models_marker_and_count_code_points(page: Any, fake: Any) -> None:
    """The gateway's indices are code points: an emoji before a citation must not shift it (JS counts UTF-16).
    A cited span that is the model's own [n] marker becomes the link (not "[1][1]"); a cited title gets one after."""
    answer = "🙂🙂 SSE is one long response [1]. See Using server-sent events too."
    start = answer.index("[1]")  # a Python string index: code points (each emoji counts 1; 2 UTF-16 units in JS)
    title = "Using server-sent events"
    citations = [
        {"type": "url_citation", "url": RESULTS[0]["url"], "title": RESULTS[0]["title"], "start_index": start,
         "end_index": start + 3},
        {"type": "url_citation", "url": RESULTS[1]["url"], "title": title, "start_index": answer.index(title),
         "end_index": answer.index(title) + len(title)},
    ]
    fake.script = Script(chunks=[answer[:10], answer[10:]], search=RESULTS[:2], citations=citations)
    open_page(page, fake.url)
    page.check("input[name=tool][value=web_search]")
    page.click("#send")
    wait_status(page, "completed")
    marks = page.locator("#answer sup.cite a")
    assert marks.all_inner_texts() == ["[1]", "[2]"]
    assert [marks.nth(i).get_attribute("href") for i in range(2)] == ["#source-1", "#source-2"]
    shown = page.inner_text("#answer")
    assert "[1][1]" not in shown and shown.count("[1]") == 1
    assert shown.replace("[2]", "") == answer  # the link took the marker's place; [2] follows the title
    assert shown.index("[2]") == shown.index(title) + len(title)


def test_real_gateway_citations_link_to_their_cards(page: Any, gateway: Gateway) -> None:
    """The real gateway's url_citation annotations (embedded search corpus, SIMULATED scripted model answering with
    a [1] marker) end up as a link to card 1; corpus URLs (respstream://) stay text, never links."""
    text = "Routing 🙂 uses a circuit breaker [1]."
    with gateway(f"scripted:0?tool=web_search&text={quote(text)}", dialect="openai") as url:
        open_page(page, url)
        output = tool_turn(page, url, "routing category circuit breaker", "web_search")["output"]
        part = next(item for item in output if item["type"] == "message")["content"][0]
        assert [(part["text"][a["start_index"]:a["end_index"]]) for a in part["annotations"]] == ["[1]"]
        cited = part["annotations"][0]
        marks = page.locator("#answer sup.cite a")
        assert marks.all_inner_texts() == ["[1]"] and marks.first.get_attribute("href") == "#source-1"
        assert page.inner_text("#answer") == text
        card = page.locator("#source-cards li.source-card").first
        assert card.locator(".source-title").inner_text() == cited["title"]
        assert cited["url"].startswith("respstream://") and card.locator("a").count() == 0
        assert page.evaluate("window.__xss") is False

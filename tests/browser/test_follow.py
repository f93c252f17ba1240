"""Issue 31, item 5: the playground's flow. A sent turn scrolls into view; the sticky composer never covers the
answer (while it streams and after); earlier turns stay in the page, a scroll away; a reader who scrolls up is not
pulled back; and the tool note tells the truth about which server tools may run. Against the real gateway with the
SIMULATED scripted upstream, in headless chromium."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Gateway, open_page, wait_status, wait_turns

pytestmark = pytest.mark.browser

LONG = "scripted:600?delay_ms=5"  # ~3 s of text, taller than the window


def send(page: Any, text: str) -> None:
    page.fill("#prompt", text)
    page.click("#send")


def geometry(page: Any) -> dict[str, float]:
    return page.evaluate("""() => {
      const box = (sel) => document.querySelector(sel).getBoundingClientRect();
      return {scrollY, viewport: innerHeight, composerTop: box('.composer').top, answerBottom: box('#answer').bottom,
              questionTop: box('#current-user').top, questionBottom: box('#current-user').bottom};
    }""")


def assert_answer_end_visible(g: dict[str, float]) -> None:
    # The end of the answer is in the window and above the sticky composer, not under it.
    assert g["answerBottom"] <= g["composerTop"] + 1, g
    assert g["answerBottom"] > 0, g


def test_a_sent_turn_is_followed_above_the_composer(page: Any, gateway: Gateway) -> None:
    with gateway(LONG) as url:
        open_page(page, url)
        send(page, "First question")
        wait_turns(page, 1)
        assert_answer_end_visible(geometry(page))
        send(page, "Second question")
        # While it streams, once the answer is taller than the room above the composer, its end stays in view.
        page.wait_for_function("() => document.querySelector('#answer').getBoundingClientRect().height"
                               " > innerHeight * 0.7 && window.__playground.status === 'streaming'", timeout=15_000)
        page.wait_for_timeout(100)  # one more painted frame
        if page.evaluate("window.__playground.status") == "streaming":
            assert_answer_end_visible(geometry(page))
        wait_turns(page, 2)
        page.wait_for_timeout(100)
        after = geometry(page)
        assert after["scrollY"] > 0  # the page moved to the new turn
        assert_answer_end_visible(after)
        # The first turn is still in the page: scrolled to, it shows above the composer.
        first = page.locator("#thread li.turn").first
        assert first.locator(".bubble.user").inner_text() == "First question"
        first.locator(".bubble.user").scroll_into_view_if_needed()
        box = first.locator(".bubble.user").bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= geometry(page)["composerTop"] + 1


def test_the_new_question_starts_at_the_top_when_the_answer_is_short(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:240?delay_ms=1") as url:
        open_page(page, url)
        send(page, "Long one")
        wait_turns(page, 1)
        page.evaluate("window.scrollTo(0, 0)")  # the reader is back at the top, far from where the next turn goes
        page.fill("#max-tokens", "4")  # a short second answer
        send(page, "Short?")
        wait_turns(page, 2, status="incomplete")
        g = geometry(page)
        assert g["scrollY"] > 0 and g["questionTop"] >= 0 and g["questionBottom"] <= g["composerTop"], g
        assert_answer_end_visible(g)


def test_scrolling_up_while_it_streams_is_not_undone(page: Any, gateway: Gateway) -> None:
    with gateway("scripted:900?delay_ms=5") as url:
        open_page(page, url)
        send(page, "First question")
        page.wait_for_function("() => document.querySelector('#answer').getBoundingClientRect().height"
                               " > innerHeight * 0.7", timeout=15_000)
        page.mouse.move(700, 400)
        page.mouse.wheel(0, -600)  # the reader goes back up to read
        page.wait_for_timeout(200)
        held = page.evaluate("scrollY")
        wait_status(page, "completed")
        page.wait_for_timeout(100)
        assert page.evaluate("scrollY") == held


def test_the_tool_note_tells_the_truth_in_each_dialect(page: Any, gateway: Gateway) -> None:
    # platform: a request without tools gets every server tool, so the calculator may run (and its card shows).
    with gateway("scripted:4?delay_ms=5") as url:
        open_page(page, url)
        page.wait_for_function("() => document.querySelector('#dialect').textContent === 'platform'")
        note = page.inner_text("#tools-note")
        assert "may run any of its server tools" in note and "no server tool is offered" not in note
        send(page, "What is 2+2?")
        wait_status(page, "completed")
        assert page.locator(".tool-card").count() == 1
        assert page.locator(".tool-card .tool-name").inner_text() == "calculator"
    # openai: server tools run only when listed, so none selected means none offered, and no card shows.
    with gateway("scripted:4?delay_ms=5", dialect="openai") as url:
        open_page(page, url)
        page.wait_for_function("() => document.querySelector('#dialect').textContent === 'openai'")
        assert page.inner_text("#tools-note").startswith("None selected: no server tool is offered")
        send(page, "What is 2+2?")
        wait_status(page, "completed")
        assert page.locator(".tool-card").count() == 0
        page.check("input[name=tool][value=calculator]")
        assert page.inner_text("#tools-note") == ("The gateway runs calculator when the question or the model calls "
                                                  "for it.")

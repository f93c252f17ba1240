"""The playground's timeline shows the gateway's repair report (``respstream:repairs``): the real gateway in front of
a SIMULATED misbehaving native Responses upstream (tests/fakes/responses_upstream.py replaying transcripts), in
chromium. The badge lists each violation code the gateway repaired with its count, exactly as the stored record says;
it is text, never markup."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from fakes.responses_upstream import FakeResponsesUpstream
from fakes.server_thread import ServerThread
from respstream.server.config import Config
from respstream.server.http.app import create_app

from .conftest import open_page, wait_status

pytestmark = pytest.mark.browser
TIMES = "\u00d7"  # MULTIPLICATION SIGN: the badge writes a count as TIMES + N


@pytest.fixture(scope="module")
def native_gateway() -> Iterator[str]:
    with FakeResponsesUpstream() as upstream:
        config = Config(dialect="platform", upstreams=[f"responses+{upstream.base_url}"],
                        upstream_options={"retries": 0, "idle_timeout": 5.0}, tools={"enabled": []},
                        rewrite={"steps": []})
        with ServerThread(create_app(config)) as server:
            yield server.url


def send(page: Any, url: str, model: str) -> None:
    open_page(page, url)
    page.select_option("#model", model)
    page.fill("#prompt", "replay it")
    page.click("#send")


def badge(page: Any) -> dict[str, str]:
    chips = page.locator("#repairs .rcode")
    return {chips.nth(i).locator("code").inner_text(): chips.nth(i).locator(".rcount").inner_text()
            for i in range(chips.count())}


def test_a_repaired_stream_shows_its_codes_and_counts(page: Any, native_gateway: str) -> None:
    # llama.cpp's shape, plus a late event, a done without added and an item never done (a SYNTHETIC transcript).
    send(page, native_gateway, "hosted_tools_repaired")
    wait_status(page, "completed")
    page.locator("#repairs").wait_for(state="visible")
    rid = page.evaluate("window.__playground.responseId")
    record = httpx.get(f"{native_gateway}/v1/responses/{rid}", timeout=5).json()
    repairs = record["respstream:repairs"]
    assert repairs and "sequence.missing" in repairs
    assert badge(page) == {code: f"{TIMES}{n}" for code, n in repairs.items()}
    assert page.inner_text("#repairs .rlabel") == f"repaired {sum(repairs.values())}"
    assert page.evaluate("window.__playground.repairs") == repairs
    assert page.evaluate("window.__playground.violations") == []  # the client-side stream itself is clean


def test_a_failed_upstream_without_a_response_in_its_terminal_gets_the_report_from_the_record(
    page: Any, native_gateway: str
) -> None:
    # Cut mid-text: the platform dialect ends with a flat `error` (no Response), so the page asks GET for the record.
    send(page, native_gateway, "truncated_mid_text")
    wait_status(page, "error")
    page.locator("#repairs").wait_for(state="visible")
    rid = page.evaluate("window.__playground.responseId")
    record = httpx.get(f"{native_gateway}/v1/responses/{rid}", timeout=5).json()
    assert badge(page) == {code: f"{TIMES}{n}" for code, n in record["respstream:repairs"].items()}
    assert "lifecycle.no_terminal" in badge(page)


def test_a_clean_native_stream_says_nothing_was_repaired(page: Any, native_gateway: str) -> None:
    send(page, native_gateway, "text")
    wait_status(page, "completed")
    page.locator("#repairs").wait_for(state="visible")
    assert page.inner_text("#repairs .rlabel") == "repaired 0"
    assert badge(page) == {}


def test_a_chat_completions_upstream_shows_no_badge(page: Any, gateway: Any) -> None:
    with gateway("scripted:5") as url:
        open_page(page, url)
        page.click("#send")
        wait_status(page, "completed")
        assert page.locator("#repairs").is_hidden()
        assert page.evaluate("window.__playground.repairs") is None


def test_codes_are_text_never_markup(page: Any, native_gateway: str) -> None:
    # A SIMULATED gateway answer (the route is intercepted in the page) whose report has hostile keys and counts.
    hostile = {"<img src=x onerror=\"window.__xss=true\">": 2, "</code><script>window.__xss=true</script>": 1,
               "item.index_mismatch": "3<b>", "sequence.missing": 1}
    response = {"id": "r-xss", "object": "response", "status": "completed", "model": "m", "output": [],
                "respstream:repairs": hostile}
    events = [{"type": "response.created", "sequence_number": 0, "response": {**response, "status": "in_progress"}},
              {"type": "response.completed", "sequence_number": 1, "response": response}]
    body = "".join(f"id: {e['sequence_number']}\nevent: message\ndata: {json.dumps(e)}\n\n" for e in events)
    page.route("**/v1/responses", lambda route: route.fulfill(
        status=200, headers={"content-type": "text/event-stream"}, body=body))
    send(page, native_gateway, "text")
    wait_status(page, "completed")
    page.locator("#repairs").wait_for(state="visible")
    got = badge(page)
    # (the count "3<b>" is not a whole number: that code is left out)
    assert got == {"<img src=x onerror=\"window.__xss=true\">": f"{TIMES}2",
                   "</code><script>window.__xss=true</script>": f"{TIMES}1", "sequence.missing": f"{TIMES}1"}
    assert page.locator("#repairs img, #repairs script, #repairs b").count() == 0
    assert page.evaluate("window.__xss") is False

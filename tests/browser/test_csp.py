"""The page works under a strict Content-Security-Policy (script-src 'self', style-src 'self', no unsafe-inline,
no unsafe-eval): a full run, view code, the inspector, the theme toggle and a dropped capture raise no violation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from .fake_gateway import Script

pytestmark = pytest.mark.browser

TRANSCRIPTS = Path(__file__).resolve().parents[1] / "transcripts"


def poll(page: Any, expression: str, timeout: float = 10.0) -> Any:
    # page.evaluate runs outside the page's CSP; wait_for_function would eval inside it (and be refused).
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = page.evaluate(expression)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {expression}")


def test_page_runs_under_a_strict_csp(page: Any, fake: Any) -> None:
    fake.script = Script(chunks=["Code:\n\n```python\nx = 1\n```\n", "done"], search=[
        {"title": "T", "url": "https://example.org/", "snippet": "s"}],
        citations=[{"type": "url_citation", "url": "https://example.org/", "title": "T", "start_index": 0,
                    "end_index": 4}],
        tool={"name": "calculator", "arguments": '{"expression": "1+1"}', "output": "2"})
    response = page.goto(fake.url + "/?csp=1")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    poll(page, "document.body.dataset.ready === 'true'")
    page.click("#send")
    poll(page, "window.__playground.status === 'completed'")
    assert page.locator("#answer pre[data-lang=python] .tok-num").count() == 1
    assert page.locator("#source-cards .source-card").count() == 1
    page.locator("#timeline-body li.ev").first.click()
    poll(page, "!document.getElementById('inspector').hidden")
    page.click("#view-code")
    poll(page, "document.getElementById('code-text').dataset.raw.startsWith('curl')")
    page.click("#close-code")
    page.select_option("#theme", "dark")
    page.evaluate("""async (text) => {
      const dt = new DataTransfer();
      dt.items.add(new File([text], "gap.sse"));
      document.body.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    }""", (TRANSCRIPTS / "gap.sse").read_text())
    poll(page, "document.getElementById('replay-note').textContent.startsWith('gap.sse')")
    assert page.evaluate("window.__csp") == []

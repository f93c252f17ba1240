"""static/markdown.js: model output can only produce our own tags and safe links (run inside chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.browser

RENDER = """
async (source) => {
  const { renderMarkdown } = await import('/static/markdown.js');
  const box = document.createElement('div');
  box.innerHTML = renderMarkdown(source);
  const tags = [...box.querySelectorAll('*')].map((e) => e.tagName.toLowerCase());
  const attrs = [...box.querySelectorAll('*')].flatMap((e) => [...e.attributes].map((a) => [a.name, a.value]));
  return { tags, attrs, text: box.textContent, html: box.innerHTML };
}
"""
ALLOWED_TAGS = {"p", "br", "strong", "em", "del", "code", "pre", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "li",
                "blockquote", "hr", "a"}
ALLOWED_ATTRS = {"href", "target", "rel", "data-lang"}

HOSTILE = [
    '<img src=x onerror="window.__xss=true">',
    "<svg onload=window.__xss=true></svg>",
    "<iframe src=javascript:window.__xss=true></iframe>",
    "[click](javascript:window.__xss=true)",
    "[data](data:text/html,<script>window.__xss=true</script>)",
    '[q](https://example.org/"onmouseover="window.__xss=true)',
    "**<b onclick=window.__xss=true>bold</b>**",
    "`<script>window.__xss=true</script>`",
    "```html\n<script>window.__xss=true</script>\n```",
    "> <a href=javascript:window.__xss=true>quote</a>",
    "- <style>body{display:none}</style>\n- item",
    "&lt;img src=x onerror=alert(1)&gt; already escaped",
]


@pytest.fixture(scope="module")
def md_page(browser: Any, fake: Any) -> Iterator[Any]:
    context = browser.new_context()
    pg = context.new_page()
    pg.add_init_script("window.__xss = false;")
    pg.goto(fake.url + "/")
    pg.wait_for_selector("body[data-ready=true]")
    yield pg
    context.close()


@pytest.mark.parametrize("source", HOSTILE)
def test_hostile_markdown_yields_only_safe_markup(md_page: Any, source: str) -> None:
    out = md_page.evaluate(RENDER, source)
    assert set(out["tags"]) <= ALLOWED_TAGS, out["html"]
    for name, value in out["attrs"]:
        assert name in ALLOWED_ATTRS, out["html"]
        if name == "href":
            assert value.startswith(("https://", "http://", "mailto:")), value
    assert md_page.evaluate("window.__xss") is False


def test_markdown_rules_render(md_page: Any) -> None:
    source = "# Title\n\nSome **bold**, *em*, `code` and [a link](https://example.org/?a=1&b=2).\n\n1. one\n2. two\n"
    out = md_page.evaluate(RENDER, source)
    assert out["tags"] == ["h2", "p", "strong", "em", "code", "a", "ol", "li", "li"]
    assert ["href", "https://example.org/?a=1&b=2"] in out["attrs"]
    assert out["text"].startswith("Title")


def test_unclosed_fence_renders_as_code_while_streaming(md_page: Any) -> None:
    out = md_page.evaluate(RENDER, "Before\n```python\nprint('<hi>')")
    assert out["tags"] == ["p", "pre", "code"]
    assert "print('<hi>')" in out["text"]


def test_snake_case_identifiers_stay_literal(md_page: Any) -> None:
    out = md_page.evaluate(RENDER, "call my__dunder__name and some_var_name here")
    assert out["tags"] == ["p"]
    assert out["text"] == "call my__dunder__name and some_var_name here"


def test_fence_with_multi_word_info_string_renders_code(md_page: Any) -> None:
    # Issue 13 item 9: this fence line used to loop forever (3.2 GB heap, then RangeError).
    out = md_page.evaluate(RENDER, 'Here:\n```python title="x.py"\nprint(1)\n```\nafter')
    assert out["tags"] == ["p", "pre", "code", "p"], out["html"]
    assert ["data-lang", "python"] in out["attrs"]
    assert "print(1)" in out["text"] and "after" in out["text"]


TIMED = """
async (source) => {
  const { renderMarkdown } = await import('/static/markdown.js');
  const t0 = performance.now();
  const html = renderMarkdown(source);
  return { ms: performance.now() - t0, size: html.length };
}
"""

# Inputs shaped to make a backtracking or non-advancing renderer blow up; each is ~200 KB.
PATHOLOGICAL = {
    "fence-info": '```python title="x.py"\n' * 10_000,
    "open-brackets": "[" * 200_000,
    "links-chained": "[a](x" * 40_000,
    "stars": "*" * 200_000,
    "underscores": "_a" * 100_000,
    "backticks": "`" * 200_000,
    "rule-like": "- " * 100_000 + "x",
    "fences-mixed": "```\n~~~ a b\n" * 10_000,
    "headings": "# " * 100_000,
    "quotes": "> " * 100_000,
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_markdown_is_linear_on_pathological_input(md_page: Any, name: str) -> None:
    source = PATHOLOGICAL[name]
    small = md_page.evaluate(TIMED, source[: len(source) // 8])
    big = md_page.evaluate(TIMED, source)
    assert big["size"] > 0
    # Linear: 8x the input may cost ~8x the time; quadratic would be ~64x. A floor absorbs timer noise.
    assert big["ms"] < max(250.0, 20 * small["ms"]), (name, small, big)

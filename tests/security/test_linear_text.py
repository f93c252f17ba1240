"""Issue 42 H2v and its class: nothing that runs over model output or request text costs more than linear time.

Each case runs one entry point over a hostile input at n and 8n characters and compares the CPU it took
(``time.process_time``: a ratio measured in the same run, never an absolute time, so a loaded machine cannot fail it).
Linear work gives about 8; quadratic gives 64, cubic 512. The bound below leaves room for noise and nothing more.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from respstream.client.errors import status_error
from respstream.server.inputs.tool_policy import ToolPolicy
from respstream.server.responses.citations import CitationSources, find_citations
from respstream.server.responses.forced_call import ForcedCallMissing, forced_arguments, forced_call
from respstream.server.responses.grounded_answer import check_calculation, check_datetime
from respstream.server.responses.rewrite import normalise_whitespace, strip_think, strip_tool_markup
from respstream.server.routing.classify import RoutingRules, arithmetic_expression, classify
from respstream.server.routing.url_scan import find_url
from respstream.server.tools.arith_words import spoken_to_expression
from respstream.server.tools.html_text import html_to_text
from respstream.server.tools.number_words import words_to_digits
from respstream.server.tools.place_zones import time_zone_in
from respstream.server.tools.search_query import search_query
from respstream.server.upstream.chat.loop_guard import LoopGuard
from respstream.server.upstream.scripted import split_text
from respstream.server.upstream.text_tool_calls import TextToolCalls, written_call

GROWTH = 8
MAX_RATIO = 24.0  # linear ~8 (+ noise); quadratic 64
_TOOL = {"type": "object", "properties": {"city": {"type": "string"}}}


def _forced(text: str) -> None:
    with pytest.raises(ForcedCallMissing):
        forced_arguments(text, "lookup", {"parameters": _TOOL}, None)


def _required(text: str) -> None:
    policy = ToolPolicy(mode="required")
    with pytest.raises(ForcedCallMissing):
        forced_call(text, policy, {"a": {"parameters": _TOOL}, "b": {"parameters": _TOOL}}, set(), {})


def _streamed(deltas: list[str]) -> None:
    detector = TextToolCalls({"lookup": _TOOL})
    for delta in deltas:
        detector.feed(delta)
    detector.finish()


def _guard(text: str) -> None:
    guard = LoopGuard()
    for start in range(0, len(text), 64):
        guard.feed(text[start:start + 64])


_ALL_ROUTES = RoutingRules(long_input_tokens=10**9)  # so that routing reads the whole text, not the first tokens

# (id, entry point, input of size n). Each input is the shape that makes a backtracking pattern blow up there.
CASES: list[tuple[str, Callable[[str], object], Callable[[int], str]]] = [
    ("forced_call fence of spaces (H2v)", _forced, lambda n: "```" + " " * n + "x"),
    ("forced_call fence of spaces closed", _forced, lambda n: "```json" + " " * n + "x ```"),
    ("required call fence of spaces", _required, lambda n: "```" + " " * n + "x"),
    ("written_call object of spaces", lambda t: written_call(t, {"lookup"}), lambda n: "{" + " " * n + "}"),
    ("written_call fence of spaces", lambda t: written_call(t, {"lookup"}), lambda n: "```" + " " * n + "{"),
    ("text tool calls: whitespace deltas", lambda t: _streamed(list(t)), lambda n: " " * n + "{}"),
    ("text tool calls: fenced lead-in", lambda t: _streamed([t]), lambda n: "```" + " " * n + "{"),
    ("classify: run of digits", lambda t: classify(t, _ALL_ROUTES), lambda n: "1" * n),
    ("classify: digits and spaces", lambda t: classify(t, _ALL_ROUTES), lambda n: "1 " * (n // 2) + "%"),
    ("classify: semicolons and spaces", lambda t: classify(t, _ALL_ROUTES), lambda n: "; " * (n // 2) + "x"),
    ("classify: what and spaces", lambda t: classify(t, _ALL_ROUTES), lambda n: "what " * (n // 5)),
    ("spoken arithmetic: digits", spoken_to_expression, lambda n: "1" * n),
    ("spoken arithmetic: decimals", spoken_to_expression, lambda n: "1." * (n // 2)),
    ("spoken arithmetic: digits then spaces", spoken_to_expression, lambda n: "1" + " " * n + "times"),
    ("arithmetic expression", arithmetic_expression, lambda n: "1" * min(n, 4000)),
    ("number words", words_to_digits, lambda n: "one-" * (n // 4)),
    ("time zone of a place", time_zone_in, lambda n: "in new " * (n // 7)),
    ("url scan", find_url, lambda n: "www.-" * (n // 5)),
    ("grounded calculation", lambda t: check_calculation(t, "1 1", "2"), lambda n: "1 " * (n // 2) + "a"),
    ("grounded datetime", lambda t: check_datetime(t, "2026-12-06T10:00:00+00:00"), lambda n: "6 " * (n // 2)),
    ("citations", lambda t: find_citations(t, CitationSources()), lambda n: "[1" * (n // 2)),
    ("strip think", strip_think, lambda n: "<think>" * (n // 7)),
    ("strip tool markup", strip_tool_markup, lambda n: "<tool_call>{" * (n // 12)),
    ("normalise whitespace", normalise_whitespace, lambda n: "a" + " " * n + "x"),
    ("loop guard", _guard, lambda n: "a " * (n // 2)),
    ("scripted split, blank tail", lambda t: split_text(t, 0), lambda n: "a" + " " * n),
    ("search query from a question", search_query, lambda n: "why " * (n // 4) + "?"),
    ("search query, quoted phrase", search_query, lambda n: '"' * n),
    ("web page to text, unclosed tags", html_to_text, lambda n: "<a " * (n // 3)),
    ("web page to text, open comment", html_to_text, lambda n: "<!--" + "-" * n),
    ("number words, hyphen runs", words_to_digits, lambda n: "twenty-" * (n // 7)),
    ("client error page: <title without >",
     lambda t: status_error(500, {"content-type": "text/html"}, t.encode()), lambda n: "<html" + "<title" * (n // 6)),
    ("client error page: < without >",
     lambda t: status_error(500, {"content-type": "text/html"}, t.encode()), lambda n: "<html" + "<" * n),
]


def _cpu(run: Callable[[str], object], text: str) -> float:
    best = float("inf")
    for _ in range(3):  # the least of three: a scheduler hiccup inflates one run, never shrinks one
        start = time.process_time()
        run(text)
        best = min(best, time.process_time() - start)
    return best


def _size_for(run: Callable[[str], object], make: Callable[[int], str]) -> int:
    """The smallest n (from 1,000) whose run takes 2 ms of CPU, so the ratio is not timer noise; at most 8,000, which
    keeps a quadratic case (the one this file exists to catch) within a few seconds at 8n."""
    n = 1000
    while n < 8000 and _cpu(run, make(n)) < 0.002:
        n *= 2
    return n


@pytest.mark.parametrize(("run", "make"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cost_grows_linearly(run: Callable[[str], object], make: Callable[[int], str]) -> None:
    n = _size_for(run, make)
    small, large = _cpu(run, make(n)), _cpu(run, make(GROWTH * n))
    ratio = large / max(small, 1e-4)
    assert ratio < MAX_RATIO, f"n={n}: {small * 1000:.1f} ms -> {large * 1000:.1f} ms at {GROWTH}n (x{ratio:.0f})"


def test_fenced_answer_still_reads_as_the_forced_call() -> None:
    """The scanner that replaced the fence regex keeps its meaning: a fence (with or without a language) around the
    arguments is fine, text around them is not."""
    for text in ('```json\n{"city": "Oslo"}\n```', '```{"city": "Oslo"}```', '  {"city": "Oslo"}  ',
                 '```JSON   {"city": "Oslo"}   ```'):
        assert forced_arguments(text, "lookup", {"parameters": _TOOL}, None) == '{"city": "Oslo"}', text
    for text in ('```json\n{"city": "Oslo"}', 'Here: {"city": "Oslo"}', "```", "``````", "[" * 100_000):
        _forced(text)


def test_written_call_still_sees_fenced_and_tagged_calls() -> None:
    call = '{"name": "lookup", "arguments": {}}'
    for text in (call, f"```json\n{call}\n```", f"<tool_call>{call}</tool_call>", f"[{call}]"):
        assert written_call(text, {"lookup"}), text
    for text in ("{" * 100_000, f"Sure: {call}", "```json\n{\"name\": \"other\"}\n```"):
        assert not written_call(text, {"lookup"}), text[:40]


def test_client_error_page_title_and_text() -> None:
    page = b"<html><head><TITLE lang=en>Bad  Gateway</title></head><body><p>x</p></body></html>"
    assert "Bad Gateway (HTML error page)" in str(status_error(502, {"content-type": "text/html"}, page))
    untitled = b"<html><body><h1>Down</h1> for <b>maintenance</b></body></html>"
    assert "Down for maintenance (HTML error page)" in str(status_error(503, {}, untitled))
    assert split_text("a b  ", 0) == ["a", " b  "]
    assert split_text("   ", 0) == ["   "]


def test_model_json_nested_past_the_stack_is_text_or_a_failed_call_never_a_crash() -> None:
    """JSON nested 100,000 deep from the model raises RecursionError in ``json.loads``; every reader of model JSON
    treats it as not JSON (the text stays text, a call fails naming why) instead of ending in internal_error."""
    import asyncio

    from respstream.server.events.client_tool_kinds import _json_object
    from respstream.server.tools.mcp_tools import McpServerSpec, McpToolbox, _Server

    deep = "[" * 100_000 + "]" * 100_000
    detector = TextToolCalls({"lookup": _TOOL}, max_call=1 << 20)
    out = detector.feed('{"name": "lookup", "arguments": ' + deep + "}") + detector.finish()
    assert detector.reason == "not valid JSON" and detector.calls == 0 and out
    assert not written_call('{"name": "lookup", "arguments": ' + deep + "}", {"lookup"})
    assert _json_object(deep) == {}
    _forced('{"a": ' + deep + "}")
    toolbox = McpToolbox([], [], policy=None)  # type: ignore[arg-type]
    server = _Server(McpServerSpec(label="s", url="http://127.0.0.1:9/mcp"))
    assert asyncio.run(toolbox._invoke(server, "t", deep)) == ("", "the arguments nest deeper than the gateway reads")

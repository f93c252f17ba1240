"""<think> splitting: every way of cutting the stream into chunks gives the same pieces."""

from __future__ import annotations

import json

import pytest

from respstream.server.upstream.base import ReasoningDelta, TextDelta
from respstream.server.upstream.chat.stream import ChunkTranslator
from respstream.server.upstream.chat.think import ThinkSplitter

CASES = [
    ("<think>plan a</think>Answer", "plan a", "Answer"),
    ("Pre <think>x < y</think> post", "x < y", "Pre  post"),
    ("a <thinking> b", "", "a <thinking> b"),
    ("<<think>>z</think>>", ">z", "<>"),
    ("no tags at all, only < and > signs", "", "no tags at all, only < and > signs"),
    ("<think>never closed", "never closed", ""),
    ("ends with <thi", "", "ends with <thi"),
    ("<think></think>x</think>", "", "x</think>"),
]


def _run(parts: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    pieces = [p for part in parts for p in splitter.feed(part)] + splitter.flush()
    assert all(text for _, text in pieces), "pieces are never empty"
    return (
        "".join(t for k, t in pieces if k == "reasoning"),
        "".join(t for k, t in pieces if k == "text"),
    )


@pytest.mark.parametrize(("source", "reasoning", "answer"), CASES, ids=[c[0] for c in CASES])
def test_split_at_every_offset(source: str, reasoning: str, answer: str) -> None:
    assert _run([source]) == (reasoning, answer)
    assert _run(list(source)) == (reasoning, answer)
    for cut in range(len(source) + 1):
        assert _run([source[:cut], source[cut:]]) == (reasoning, answer), f"cut at {cut}"
    for a in range(len(source) + 1):
        for b in range(a, len(source) + 1):
            assert _run([source[:a], source[a:b], source[b:]]) == (reasoning, answer), f"cuts at {a},{b}"


def test_plain_text_is_not_delayed() -> None:
    splitter = ThinkSplitter()
    assert splitter.feed("Hello") == [("text", "Hello")]
    # Only a possible tag prefix waits for the next chunk.
    assert splitter.feed(" wor<th") == [("text", " wor")]
    assert splitter.feed("ink>") == []
    assert splitter.in_think


def test_translator_splits_think_in_content_across_chunks() -> None:
    source = "<think>Let me think.</think>Paris."
    for cut in range(len(source) + 1):
        translator = ChunkTranslator()
        out = []
        for part in (source[:cut], source[cut:]):
            if part:
                payload = json.dumps({"choices": [{"index": 0, "delta": {"content": part}}]}).encode()
                out += translator.feed(payload)
        out += translator.feed(b'{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}')
        out += translator.finish()
        reasoning = "".join(c.text for c in out if isinstance(c, ReasoningDelta))
        text = "".join(c.text for c in out if isinstance(c, TextDelta))
        assert (reasoning, text) == ("Let me think.", "Paris."), f"cut at {cut}"

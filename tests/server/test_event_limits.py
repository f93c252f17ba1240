"""max_event_bytes (an oversized event is never sent; the stream ends with `event_too_large`) and `tool_error`
(a server tool that raises: its item is closed as failed, then the terminal)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.upstream.base import Chunk, Finish, GenerationRequest, TextDelta
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import FakeRewriter, FakeRouter, FakeToolResult, FakeTools, ServerThread, post_stream

LIMIT = 4096


class BigDeltaUpstream:
    """SIMULATED upstream: two small deltas, then one delta of 10 kB (over the limit), then more text."""

    name = "big"
    models = ["big"]

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        yield TextDelta("small ")
        yield TextDelta("start ")
        yield TextDelta("x" * 10_000)
        yield TextDelta("never sent")
        yield Finish("stop")

    async def aclose(self) -> None:
        return None


class CrashingTools(FakeTools):
    """SIMULATED tools whose calculator raises (a broken tool, not a failed result)."""

    async def run(self, name: str, arguments_json: str) -> FakeToolResult:
        if name == "calculator":
            raise RuntimeError("calculator blew up")
        return await super().run(name, arguments_json)


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    upstreams: dict[str, Any] = {
        "short": ScriptedUpstream(5, name="short", models=["short"]),
        "long": ScriptedUpstream(600, name="long", models=["long"]),
        "big": BigDeltaUpstream(),
        "tool": ScriptedUpstream(3, name="tool", models=["tool"], tool="calculator"),
    }
    cfg = Config(dialect=request.param, upstreams=["scripted:1"], max_event_bytes=LIMIT)
    app = create_app(cfg, Components(router=FakeRouter(upstreams), tools=CrashingTools(), rewriter=FakeRewriter()))
    with ServerThread(app) as srv:
        yield srv.url, request.param


def _data_sizes(raw: bytes) -> list[int]:
    return [len(line) - 6 for line in raw.split(b"\n") if line.startswith(b"data: ")]


def test_small_response_is_untouched(server: tuple[str, str]) -> None:
    url, dialect = server
    d = post_stream(url, {"input": "x", "model": "short"}, dialect=dialect)
    assert d.violations == [] and d.core.result.status == "completed"
    assert max(_data_sizes(d.raw)) <= LIMIT


def test_oversized_delta_is_not_sent_and_ends_the_stream(server: tuple[str, str]) -> None:
    url, dialect = server
    d = post_stream(url, {"input": "x", "model": "big"}, dialect=dialect)
    assert d.violations == []
    assert max(_data_sizes(d.raw)) <= LIMIT
    assert b"xxxxxxxxxx" not in d.raw and b"never sent" not in d.raw
    result = d.core.result
    assert result.status in ("error", "failed")
    assert result.error is not None and result.error["code"] == "event_too_large"
    assert result.streamed_text == "small start "


def test_oversized_terminal_becomes_event_too_large(server: tuple[str, str]) -> None:
    # 600 deltas stream fine one by one; the terminal carrying the whole Response would exceed the limit.
    url, dialect = server
    d = post_stream(url, {"input": "x", "model": "long"}, dialect=dialect)
    assert d.violations == []
    assert max(_data_sizes(d.raw)) <= LIMIT
    assert d.types[-1] == ("error" if dialect == "platform" else "response.failed")
    assert d.core.result.error is not None and d.core.result.error["code"] == "event_too_large"
    assert "max_event_bytes" in d.core.result.error["message"]


def test_crashing_tool_ends_with_tool_error_after_its_item(server: tuple[str, str]) -> None:
    url, dialect = server
    d = post_stream(url, {"input": "x", "model": "tool", "tools": [{"type": "calculator"}]}, dialect=dialect)
    assert d.violations == []
    result = d.core.result
    assert result.error is not None and result.error["code"] == "tool_error"
    assert "calculator" in result.error["message"]
    done = [p["item"] for p in d.payloads() if p["type"] == "response.output_item.done"]
    assert len(done) == 1 and done[0]["status"] == "failed"
    expected = {"platform": "function_call", "openai": "mcp_call", "openresponses": "respstream:calculator_call"}
    assert done[0]["type"] == expected[dialect]

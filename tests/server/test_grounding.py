"""Ground first: the gateway runs the right server tool before the model answers, so even a model too small to call
tools answers from a calculator result or the clock. Uses the REAL Router and ToolRegistry with the in-process
SIMULATED scripted upstream (which never calls tools itself here), over a real loopback server."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest

from respstream.server.config import Config
from respstream.server.http.app import Components, create_app
from respstream.server.routing.router import Router
from respstream.server.tools.registry import ToolRegistry
from respstream.server.upstream.base import Chunk, GenerationRequest
from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import Decoded, FakeRewriter, ServerThread, post_stream

DIALECTS = ["platform", "openai"]


class RecordingUpstream(ScriptedUpstream):
    """The SIMULATED scripted model, keeping the messages of every generation request it gets."""

    def __init__(self) -> None:
        super().__init__(4, name="rec", models=["scripted-a"])
        self.seen: list[list[dict[str, Any]]] = []

    async def generate(self, request: GenerationRequest) -> AsyncGenerator[Chunk, None]:
        self.seen.append([dict(m) for m in request.messages])
        async for chunk in super().generate(request):
            yield chunk


@pytest.fixture(scope="module", params=DIALECTS)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, RecordingUpstream]]:
    upstream = RecordingUpstream()
    cfg = Config(dialect=request.param, upstreams=["scripted:4"])
    comps = Components(router=Router([upstream]), tools=ToolRegistry(), rewriter=FakeRewriter())
    with ServerThread(create_app(cfg, comps)) as srv:
        yield srv.url, request.param, upstream


def _tool_items(got: Decoded) -> list[dict[str, Any]]:
    done = [p["item"] for p in got.payloads() if p["type"] == "response.output_item.done"]
    return [i for i in done if i["type"] != "message"]


def _name_and_arguments(item: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return item["name"], json.loads(item["arguments"])


def test_arithmetic_runs_the_calculator_first(server: tuple[str, str, RecordingUpstream]) -> None:
    url, dialect, upstream = server
    # The openai dialect runs server tools only when the request lists them (docs/compatibility.md).
    got = post_stream(url, {"input": "What is 17 * 23?", "tools": [{"type": "calculator"}]}, dialect=dialect)
    assert got.violations == [], got.violations
    routing = next(p for p in got.payloads() if p["type"].endswith("response.routing.completed"))
    assert routing["reasoning"] == "Contains arithmetic; calculator first"
    item = _tool_items(got)[0]
    assert item["type"] == ("function_call" if dialect == "platform" else "mcp_call")
    assert _name_and_arguments(item) == ("calculator", {"expression": "17 * 23"})
    assert item["output"] == "391" and item["status"] == "completed"
    output = got.core.result.output
    assert [o["type"] for o in output][-1] == "message"  # the tool call comes before the answer
    assert len(_tool_items(got)) == 1  # once per response
    # The model got the result as the result of a tool call.
    messages = upstream.seen[-1]
    assert messages[-1]["role"] == "tool" and messages[-1]["content"] == "391"
    assert messages[-2]["tool_calls"][0]["function"]["name"] == "calculator"
    assert got.core.result.status == "completed" and got.core.result.output_text


def test_time_question_reads_the_clock_in_the_named_city(server: tuple[str, str, RecordingUpstream]) -> None:
    url, dialect, _ = server
    got = post_stream(url, {"input": "What time is it in Amsterdam?", "tools": [{"type": "current_datetime"}]},
                      dialect=dialect)
    assert got.violations == [], got.violations
    item = _tool_items(got)[0]
    assert _name_and_arguments(item) == ("current_datetime", {"timezone": "Europe/Amsterdam"})
    assert item["status"] == "completed"
    assert item["output"][-6:] in ("+01:00", "+02:00") and "Europe/Amsterdam" in item["output"]  # CET or CEST
    assert item["output"].split()[0] in ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    assert "web_search" not in got.raw.decode()


def test_no_grounding_when_the_request_does_not_enable_the_tool(server: tuple[str, str, RecordingUpstream]) -> None:
    url, dialect, upstream = server
    got = post_stream(url, {"input": "What is 17 * 23?", "tools": [{"type": "current_datetime"}]}, dialect=dialect)
    assert got.violations == []
    assert _tool_items(got) == []
    assert all(m["role"] != "tool" for m in upstream.seen[-1])
    assert got.core.result.output_text


def test_no_grounding_on_a_function_call_output_continuation(server: tuple[str, str, RecordingUpstream]) -> None:
    url, dialect, _ = server
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    got = post_stream(url, {"tools": [tool, {"type": "calculator"}, {"type": "current_datetime"}], "input": [
        {"type": "message", "role": "user", "content": "What is 17 * 23?"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "17 * 23 = 391, what time is it"}]},
        dialect=dialect)
    assert got.violations == []
    assert _tool_items(got) == []
    assert got.core.result.output_text


def test_plain_greeting_has_no_tool_call(server: tuple[str, str, RecordingUpstream]) -> None:
    url, dialect, upstream = server
    got = post_stream(url, {"input": "Hello"}, dialect=dialect)
    assert got.violations == []
    assert _tool_items(got) == []
    assert all(m["role"] != "tool" for m in upstream.seen[-1])


def test_a_pinned_model_is_not_grounded(server: tuple[str, str, RecordingUpstream]) -> None:
    url, dialect, _ = server
    got = post_stream(url, {"input": "What is 17 * 23?", "model": "scripted-a", "tools": [{"type": "calculator"}]},
                      dialect=dialect)
    assert got.violations == []
    assert _tool_items(got) == []


def test_with_client_tools_the_result_is_a_note_so_the_model_may_still_call_them(
    server: tuple[str, str, RecordingUpstream],
) -> None:
    url, dialect, upstream = server
    tool = {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {}}}
    got = post_stream(url, {"input": "What is 17 * 23?", "tools": [tool, {"type": "calculator"}]}, dialect=dialect)
    assert got.violations == []
    assert _name_and_arguments(_tool_items(got)[0]) == ("calculator", {"expression": "17 * 23"})
    messages = upstream.seen[-1]
    assert messages[-1]["role"] == "user"
    assert any(m["role"] == "system" and "391" in m["content"] for m in messages)

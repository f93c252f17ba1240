"""POST /v1/responses streaming in both dialects: every stream decodes with zero protocol violations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from respstream.server.upstream.scripted import ScriptedUpstream

from .helpers import Decoded, FakeRewriter, ServerThread, make_app, post_stream

DIALECTS = ["platform", "openai", "openresponses"]


@pytest.fixture(scope="module", params=DIALECTS)
def server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    upstreams = {
        "scripted-a": ScriptedUpstream(8, name="a", models=["scripted-a"]),
        "tooly": ScriptedUpstream(4, name="tooly", models=["tooly"], tool="calculator"),
        "searchy": ScriptedUpstream(4, name="searchy", models=["searchy"], tool="web_search"),
        "client-tool": ScriptedUpstream(4, name="ct", models=["client-tool"], tool="get_weather"),
        "thinker": ScriptedUpstream(3, name="thinker", models=["thinker"], reasoning=2),
        "broken": ScriptedUpstream(5, name="broken", models=["broken"], fail_at=2),
    }
    # openresponses: with the opt-in routing extension event, so the routing tests below see it in every dialect.
    extra = {"openresponses_routing_event": True} if request.param == "openresponses" else {}
    app = make_app(dialect=request.param, upstreams=upstreams, rewriter=FakeRewriter({"fox": "cat"}), **extra)
    with ServerThread(app) as srv:
        yield srv.url, request.param


def test_plain_stream_has_no_violations(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "hello"}, dialect=dialect)
    assert got.status_code == 200
    assert got.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert got.headers["cache-control"] == "no-store"
    assert got.headers["x-accel-buffering"] == "no"
    assert got.headers["x-request-id"]
    assert got.violations == []
    result = got.core.result
    assert result.status == "completed"
    assert result.output_text == "The quick brown cat jumps over the lazy"
    assert result.streamed_text == "The quick brown fox jumps over the lazy"
    assert result.rewritten
    types = got.types
    assert types[0] == "response.created"
    # The platform's own event; prefixed as an extension in the openai dialect.
    assert ("response.routing.completed" if dialect == "platform" else "respstream:response.routing.completed") in types
    assert types[-1] == "response.completed"
    seqs = [p["sequence_number"] for p in got.payloads()]
    assert seqs == list(range(len(seqs)))
    frame_names = [line for line in got.raw.split(b"\n") if line.startswith(b"event: ")]
    if dialect == "platform":
        assert set(frame_names) == {b"event: message"}
        assert "-" in got.payloads()[0]["response"]["id"]  # a UUID
        assert got.payloads()[0]["response"]["created_at"] > 10**12  # milliseconds
    else:
        assert frame_names[0] == b"event: response.created"
        assert types[1] == "response.in_progress"
        assert got.payloads()[0]["response"]["id"].startswith("resp_")
    final = got.payloads()[-1]["response"]
    if dialect == "openresponses":  # the spec: no `id:` lines, the literal [DONE] after the terminal
        assert b"\nid: " not in got.raw and not got.raw.startswith(b"id:")
        assert got.raw.endswith(b"data: [DONE]\n\n") and got.raw.count(b"[DONE]") == 1
    else:
        assert b"id: 0\n" in got.raw and b"[DONE]" not in got.raw
    # Both timestamps in one unit: milliseconds on the platform, seconds otherwise.
    assert got.payloads()[0]["response"]["completed_at"] is None
    assert 0 <= final["completed_at"] - final["created_at"] < (60_000 if dialect == "platform" else 60)


def test_pinned_model_skips_routing_event(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "hi", "model": "scripted-a"}, dialect=dialect)
    assert got.violations == []
    assert not any(t.endswith("response.routing.completed") for t in got.types)
    assert got.core.result.model == "scripted-a"


def test_server_tool_loops_back_into_the_model(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "what is 2+2", "model": "tooly", "tools": [{"type": "calculator"}]},
                      dialect=dialect)
    assert got.violations == [], got.violations
    done = [p["item"] for p in got.payloads() if p["type"] == "response.output_item.done"]
    tool_item = done[0]
    if dialect == "platform":
        assert tool_item["type"] == "function_call" and tool_item["name"] == "calculator"
        assert tool_item["output"] == "4" and tool_item["status"] == "completed"
    elif dialect == "openai":
        assert tool_item["type"] == "mcp_call" and tool_item["server_label"] == "respstream"
        assert tool_item["output"] == "4"
    else:  # Open Responses: a hosted tool of ours is a `respstream:` extension item
        assert tool_item["type"] == "respstream:calculator_call" and tool_item["name"] == "calculator"
        assert tool_item["output"] == "4" and tool_item["status"] == "completed"
    assert got.core.result.status == "completed"
    assert got.core.result.output_text  # the model answered after the tool result


def test_web_search_is_hosted_shape_in_openai_dialect(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "find docs", "model": "searchy", "tools": [{"type": "web_search"}]},
                      dialect=dialect)
    assert got.violations == []
    first = next(p["item"] for p in got.payloads() if p["type"] == "response.output_item.done")
    if dialect == "openai":
        assert first["type"] == "web_search_call"
        assert first["action"]["sources"] == [{"type": "url", "url": "https://example.org/doc"}]
        assert "response.web_search_call.completed" in got.types
    elif dialect == "openresponses":
        assert first["type"] == "respstream:web_search_call" and first["name"] == "web_search"
        assert first["sources"] == [{"type": "url", "url": "https://example.org/doc"}]
    else:
        assert first["type"] == "function_call" and first["name"] == "web_search"


def test_retrieval_route_searches_first(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "the latest news", "tools": [{"type": "web_search"}]}, dialect=dialect)
    assert got.violations == []
    routing = next(p for p in got.payloads() if p["type"].endswith("response.routing.completed"))
    assert routing["category"] == "retrieval"
    added = [p["item"] for p in got.payloads() if p["type"] == "response.output_item.added"]
    assert added[0]["type"] in ("function_call", "web_search_call", "respstream:web_search_call")
    assert got.core.result.output_text


def test_client_function_tool_ends_with_the_call(server: tuple[str, str]) -> None:
    url, dialect = server
    tool = {"type": "function", "name": "get_weather", "description": "weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
    got = post_stream(url, {"input": "weather?", "model": "client-tool", "tools": [tool]}, dialect=dialect)
    assert got.violations == []
    result = got.core.result
    assert result.status == "completed"
    assert [c["name"] for c in result.tool_calls] == ["get_weather"]
    call_id = result.tool_calls[0]["call_id"]
    response_id = result.response_id
    follow = post_stream(url, {"model": "client-tool", "previous_response_id": response_id, "tools": [tool],
                               "input": [{"type": "function_call_output", "call_id": call_id, "output": "sunny"}]},
                         dialect=dialect)
    assert follow.violations == []
    assert follow.core.result.output_text  # continued after the client ran the tool


def test_reasoning_goes_to_reasoning_items(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "think", "model": "thinker"}, dialect=dialect)
    assert got.violations == []
    assert ("response.reasoning.delta" if dialect == "openresponses" else "response.reasoning_text.delta") in got.types
    assert got.core.result.output[0]["status"] == "completed"
    assert "thinking" not in got.core.result.output_text
    assert got.core.result.output[0]["type"] == "reasoning"


def test_upstream_failure_mid_stream_ends_with_error(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "x", "model": "broken"}, dialect=dialect)
    assert got.violations == []
    assert got.core.result.error is not None and got.core.result.error["code"] == "upstream_error"
    if dialect == "platform":
        assert got.types[-1] == "error"
        assert got.core.result.status == "error"
    else:
        assert got.types[-2:] == ["error", "response.failed"]
        assert got.core.result.status == "failed"


def test_max_output_tokens_is_incomplete(server: tuple[str, str]) -> None:
    url, dialect = server
    got = post_stream(url, {"input": "x", "max_output_tokens": 3}, dialect=dialect)
    assert got.violations == []
    assert got.core.result.status == "incomplete"
    assert got.core.result.incomplete_details == {"reason": "max_output_tokens"}
    assert got.types[-1] == ("response.completed" if dialect == "platform" else "response.incomplete")


def _searched(got: Decoded) -> bool:
    added = [p["item"] for p in got.payloads() if p["type"] == "response.output_item.added"]
    return any(i["type"] == "web_search_call" or i.get("name") == "web_search" for i in added)


def test_retrieval_route_does_not_search_again_on_a_tool_output_continuation(server: tuple[str, str]) -> None:
    url, dialect = server
    tool = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}
    first = post_stream(url, {"input": "weather?", "model": "client-tool", "tools": [tool]}, dialect=dialect)
    call_id = first.core.result.tool_calls[0]["call_id"]
    # model auto, and the tool output reads like a fresh-facts question: the route is retrieval, but the turn carries
    # tool results, so the answer is grounded in them, not in a search for the tool's output.
    search = {"type": "web_search"}  # listed: the openai dialect runs only the server tools a request asks for
    previous = first.core.result.response_id
    follow = post_stream(url, {"previous_response_id": previous, "tools": [tool, search], "input": [
        {"type": "function_call_output", "call_id": call_id, "output": "the latest reading: sunny"}]}, dialect=dialect)
    assert follow.violations == []
    routing = next(p for p in follow.payloads() if p["type"].endswith("response.routing.completed"))
    assert routing["category"] == "retrieval"
    assert not _searched(follow)
    assert follow.core.result.output_text
    # The same history followed by a new user question is fresh input again: it searches (when the request brings
    # no client tools: with them it is an agent's turn, and the model calls what it needs; test_client_tool_turns).
    fresh = post_stream(url, {"input": [
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "message", "role": "user", "content": "and the latest news?"}], "tools": [search]},
        dialect=dialect)
    assert fresh.violations == []
    assert _searched(fresh)

"""ChatCompletionsUpstream against the SIMULATED FakeChatCompletionsServer over real loopback HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from fakes.chat_server import (
    Done,
    Drop,
    FakeChatCompletionsServer,
    Raw,
    Sleep,
    Stall,
    Status,
    Step,
    finish,
    free_port,
    reasoning,
    refusal,
    text,
    tool,
    usage,
)
from respstream.server.upstream.base import (
    Chunk,
    Finish,
    GenerationRequest,
    ReasoningDelta,
    RefusalDelta,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
    Usage,
)
from respstream.server.upstream.chat.adapter import ChatCompletionsUpstream
from respstream.server.upstream.chat_wire import parse_retry_after

REQUEST = GenerationRequest(model="fake-model", messages=[{"role": "user", "content": "hi"}], max_output_tokens=50)


def make(fake: FakeChatCompletionsServer, **options: Any) -> ChatCompletionsUpstream:
    defaults: dict[str, Any] = {"name": "fake", "idle_timeout": 5.0, "retry_backoff": 0.01}
    defaults.update(options)
    return ChatCompletionsUpstream(fake.url, **defaults)


async def collect(upstream: ChatCompletionsUpstream, request: GenerationRequest = REQUEST) -> list[Chunk]:
    try:
        return [chunk async for chunk in upstream.generate(request)]
    finally:
        await upstream.aclose()


async def failure(upstream: ChatCompletionsUpstream) -> tuple[UpstreamError, list[Chunk]]:
    got: list[Chunk] = []
    try:
        with pytest.raises(UpstreamError) as info:
            async for chunk in upstream.generate(REQUEST):
                got.append(chunk)
    finally:
        await upstream.aclose()
    return info.value, got


async def test_text_chunks_and_request_body(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("Hel"), text("lo"), finish("stop"), usage(12, 2, cached=4), Done())
    chunks = await collect(make(fake, api_key="sk-test"))
    assert chunks == [TextDelta("Hel"), TextDelta("lo"), Finish("stop", Usage(12, 2, 0, 4))]
    body = fake.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "fake-model" and body["max_tokens"] == 50
    assert "tools" not in body


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_reasoning_fields(fake: FakeChatCompletionsServer, key: str) -> None:
    fake.script(
        reasoning("think ", key),
        reasoning("more", key),
        text("Answer"),
        finish(),
        usage(5, 3, reasoning_tokens=2),
        Done(),
    )
    chunks = await collect(make(fake))
    assert chunks == [
        ReasoningDelta("think "),
        ReasoningDelta("more"),
        TextDelta("Answer"),
        Finish("stop", Usage(5, 3, 2, 0)),
    ]


async def test_think_tags_in_content_split_live(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("<thi"), text("nk>plan"), text("</th"), text("ink>Paris"), text("."), finish(), Done())
    chunks = await collect(make(fake))
    assert chunks == [ReasoningDelta("plan"), TextDelta("Paris"), TextDelta("."), Finish("stop", None)]


async def test_tool_call_deltas_split_awkwardly(fake: FakeChatCompletionsServer) -> None:
    fake.script(
        tool(0, id="call_a", name="get_weather", args=""),
        tool(0, args='{"ci'),
        tool(1, id="call_b", name="calculator"),
        tool(0, args='ty": "Par'),
        tool(1, args='{"expression": "2+2"}'),
        tool(0, args='is"}'),
        finish("tool_calls"),
        Done(),
    )
    chunks = await collect(make(fake))
    # A call starts when its arguments begin (its name is complete then), so the empty first fragment is folded in.
    assert chunks == [
        ToolCallDelta(0, call_id="call_a", name="get_weather", arguments='{"ci'),
        ToolCallDelta(0, arguments='ty": "Par'),
        ToolCallDelta(1, call_id="call_b", name="calculator", arguments='{"expression": "2+2"}'),
        ToolCallDelta(0, arguments='is"}'),
        Finish("tool_calls", None),
    ]


async def test_tool_name_streamed_in_pieces_is_concatenated(fake: FakeChatCompletionsServer) -> None:
    fake.script(
        tool(0, id="call_a", name="get_", args=""),
        tool(0, name="wea"),
        tool(0, name="ther", args='{"city":'),
        tool(0, name="ignored_after_arguments_began", args=' "Paris"}'),
        finish("tool_calls"),
        Done(),
    )
    chunks = await collect(make(fake))
    assert chunks == [
        ToolCallDelta(0, call_id="call_a", name="get_weather", arguments='{"city":'),
        ToolCallDelta(0, arguments=' "Paris"}'),
        Finish("tool_calls", None),
    ]


async def test_tool_name_resent_whole_or_growing_is_not_doubled(fake: FakeChatCompletionsServer) -> None:
    fake.script(
        tool(0, id="call_a", name="lookup"),
        tool(0, id="call_a", name="lookup", args="{}"),
        tool(1, id="call_b", name="get"),
        tool(1, name="get_time"),
        tool(1, name="get_time"),
        finish("tool_calls"),
        Done(),
    )
    chunks = await collect(make(fake))
    assert chunks == [
        ToolCallDelta(0, call_id="call_a", name="lookup", arguments="{}"),
        ToolCallDelta(1, call_id="call_b", name="get_time", arguments=""),  # no arguments: started at the end
        Finish("tool_calls", None),
    ]


async def test_waiting_calls_start_in_index_order(fake: FakeChatCompletionsServer) -> None:
    fake.script(
        tool(0, id="call_a", name="first"),
        tool(1, id="call_b", name="second", args="{}"),
        tool(0, args="{}"),
        finish("tool_calls"),
        Done(),
    )
    chunks = await collect(make(fake))
    assert chunks == [
        ToolCallDelta(0, call_id="call_a", name="first", arguments=""),
        ToolCallDelta(1, call_id="call_b", name="second", arguments="{}"),
        ToolCallDelta(0, arguments="{}"),
        Finish("tool_calls", None),
    ]


async def test_tool_call_without_id_and_name_after_arguments(fake: FakeChatCompletionsServer) -> None:
    # Arguments before the name are held back so the first delta carries call_id and name; no id -> generated.
    fake.script(tool(0, args='{"a"'), tool(0, name="lookup", args=": 1"), tool(0, args="}"), finish("stop"), Done())
    chunks = await collect(make(fake))
    first = chunks[0]
    assert isinstance(first, ToolCallDelta)
    assert first.name == "lookup" and first.call_id is not None and first.call_id.startswith("call_")
    assert first.arguments == '{"a": 1'
    assert chunks[1:] == [ToolCallDelta(0, arguments="}"), Finish("tool_calls", None)]


async def test_tool_index_reused_with_new_id_is_a_new_call(fake: FakeChatCompletionsServer) -> None:
    fake.script(
        tool(0, id="call_1", name="a", args="{}"),
        tool(0, id="call_2", name="b", args='{"x":'),
        tool(0, args="2}"),
        tool(None, id="call_3", name="c", args="{}"),
        finish("tool_calls"),
        Done(),
    )
    chunks = await collect(make(fake))
    assert chunks == [
        ToolCallDelta(0, call_id="call_1", name="a", arguments="{}"),
        ToolCallDelta(1, call_id="call_2", name="b", arguments='{"x":'),
        ToolCallDelta(1, arguments="2}"),
        ToolCallDelta(2, call_id="call_3", name="c", arguments="{}"),
        Finish("tool_calls", None),
    ]


async def test_tools_are_sent(fake: FakeChatCompletionsServer) -> None:
    spec = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    fake.script(text("ok"), finish(), Done())
    request = GenerationRequest(
        model="m", messages=[{"role": "user", "content": "x"}], tools=[spec], tool_choice="auto"
    )
    await collect(make(fake), request)
    assert fake.requests[0]["tools"] == [spec] and fake.requests[0]["tool_choice"] == "auto"


async def test_refusal(fake: FakeChatCompletionsServer) -> None:
    fake.script(refusal("I can't "), refusal("help with that."), finish("stop"), Done())
    chunks = await collect(make(fake))
    assert chunks == [RefusalDelta("I can't "), RefusalDelta("help with that."), Finish("stop", None)]


@pytest.mark.parametrize(
    ("upstream_reason", "reason"), [("length", "length"), ("content_filter", "content_filter"), ("eos", "stop")]
)
async def test_finish_reasons(fake: FakeChatCompletionsServer, upstream_reason: str, reason: str) -> None:
    fake.script(text("partial"), finish(upstream_reason), usage(3, 1), Done())
    chunks = await collect(make(fake))
    assert chunks == [TextDelta("partial"), Finish(reason, Usage(3, 1))]


async def test_done_without_finish_reason_is_stop(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("x"), Done())
    assert await collect(make(fake)) == [TextDelta("x"), Finish("stop", None)]


async def test_crlf_framing_and_comments(fake: FakeChatCompletionsServer) -> None:
    fake.script(
        Raw(b": keep-alive\r\n\r\n"),
        Raw(b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\r\n\r\n'),
        Raw(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\r\n\r\ndata: [DONE]\r\n\r\n'),
    )
    assert await collect(make(fake)) == [TextDelta("a"), Finish("stop", None)]


# -- errors ------------------------------------------------------------------------------------------------------


async def test_5xx_before_streaming_is_retried_then_succeeds(fake: FakeChatCompletionsServer) -> None:
    fake.script(Status(503, {"error": {"message": "overloaded"}}))
    fake.script(Status(500))
    fake.script(text("ok"), finish(), Done())
    chunks = await collect(make(fake, retries=2))
    assert chunks == [TextDelta("ok"), Finish("stop", None)]
    assert len(fake.requests) == 3


async def test_5xx_after_retries_exhausted(fake: FakeChatCompletionsServer) -> None:
    fake.script(Status(502, {"error": {"message": "bad gateway upstream"}}))
    error, got = await failure(make(fake, retries=1))
    assert (error.code, error.status, error.before_first_token) == ("upstream_error", 502, True)
    assert "bad gateway upstream" in error.message and got == []
    assert len(fake.requests) == 2


async def test_4xx_is_not_retried(fake: FakeChatCompletionsServer) -> None:
    fake.script(Status(400, {"error": {"message": "context length exceeded"}}))
    error, _ = await failure(make(fake, retries=3))
    assert (error.code, error.status) == ("upstream_error", 400)
    assert "context length exceeded" in error.message
    assert len(fake.requests) == 1


async def test_429_keeps_retry_after_and_is_not_retried(fake: FakeChatCompletionsServer) -> None:
    fake.script(Status(429, {"error": {"message": "slow down"}}, {"Retry-After": "7"}))
    error, _ = await failure(make(fake, retries=3))
    assert (error.code, error.status, error.retry_after, error.before_first_token) == ("rate_limited", 429, 7.0, True)
    assert len(fake.requests) == 1


async def test_connection_refused_is_unavailable() -> None:
    upstream = ChatCompletionsUpstream(
        f"http://127.0.0.1:{free_port()}/v1", name="nobody", retries=1, retry_backoff=0.01
    )
    error, _ = await failure(upstream)
    assert (error.code, error.before_first_token) == ("upstream_unavailable", True)
    assert "cannot connect" in error.message


async def test_drop_mid_stream_after_first_token(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("Hello"), Drop())
    error, got = await failure(make(fake, retries=3))
    assert got == [TextDelta("Hello")]
    assert (error.code, error.before_first_token) == ("upstream_error", False)
    assert len(fake.requests) == 1, "never retried after the first token"


async def test_drop_before_first_token_is_retried(fake: FakeChatCompletionsServer) -> None:
    fake.script(Drop())
    fake.script(text("second try"), finish(), Done())
    chunks = await collect(make(fake, retries=1))
    assert chunks == [TextDelta("second try"), Finish("stop", None)]
    assert len(fake.requests) == 2


async def test_eof_without_finish_is_an_error(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("cut"))
    error, got = await failure(make(fake, retries=0))
    assert got == [TextDelta("cut")]
    assert (error.code, error.before_first_token) == ("upstream_error", False)
    assert "finish_reason" in error.message


async def test_stall_hits_idle_timeout(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("a"), Stall())
    error, got = await failure(make(fake, idle_timeout=0.3, retries=0))
    assert got == [TextDelta("a")]
    assert (error.code, error.before_first_token) == ("upstream_timeout", False)
    assert "idle" in error.message


async def test_stall_before_first_token(fake: FakeChatCompletionsServer) -> None:
    fake.script(Stall())
    error, got = await failure(make(fake, idle_timeout=0.2, retries=0))
    assert got == [] and (error.code, error.before_first_token) == ("upstream_timeout", True)


async def test_generation_deadline(fake: FakeChatCompletionsServer) -> None:
    steps: list[Step] = []
    for i in range(20):
        steps += [text(f"w{i} "), Sleep(0.05)]
    fake.script(*steps, finish(), Done())
    error, got = await failure(make(fake, deadline=0.3, retries=0))
    assert 1 <= len(got) < 20
    assert (error.code, error.before_first_token) == ("upstream_timeout", False)
    assert "deadline" in error.message


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"data: {not json\n\n", "not JSON"),
        (b"data: [1, 2]\n\n", "not a JSON object"),
        (b'data: {"error": {"message": "model crashed"}}\n\n', "model crashed"),
        (b'data: {"choices": "nope"}\n\n', "choices"),
        (b'event: error\ndata: {"error": {"message": "boom"}}\n\n', "boom"),
    ],
    ids=["not-json", "not-object", "error-chunk", "bad-choices", "error-event"],
)
async def test_malformed_chunks(fake: FakeChatCompletionsServer, raw: bytes, words: str) -> None:
    fake.script(text("a"), Raw(raw), text("b"), finish(), Done())
    error, got = await failure(make(fake, retries=0))
    assert got == [TextDelta("a")]
    assert (error.code, error.before_first_token) == ("upstream_error", False)
    assert words in error.message


async def test_finish_reason_error_is_upstream_error(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("a"), finish("error"), Done())
    error, _ = await failure(make(fake, retries=0))
    assert error.code == "upstream_error" and "error" in error.message


# -- connection and slot release ---------------------------------------------------------------------------------


async def test_early_close_releases_connection_and_slot(fake: FakeChatCompletionsServer) -> None:
    steps: list[Step] = []
    for i in range(200):
        steps += [text(f"t{i}"), Sleep(0.02)]
    fake.script(*steps, finish(), Done())
    fake.script(text("next"), finish(), Done())
    upstream = make(fake, max_concurrency=1, queue_timeout=1.0)
    try:
        gen = upstream.generate(REQUEST)
        assert isinstance(gen, AsyncIterator)
        first = await anext(gen)
        assert first == TextDelta("t0")
        await gen.aclose()  # the client went away
        assert await asyncio.to_thread(fake.wait_finished, 1, 5.0)
        assert fake.client_disconnects == 1, "the server saw the HTTP connection close"
        # The only slot is free again: a second generation does not queue.
        chunks = [c async for c in upstream.generate(REQUEST)]
        assert chunks == [TextDelta("next"), Finish("stop", None)]
    finally:
        await upstream.aclose()


async def test_queue_timeout_when_all_slots_busy(fake: FakeChatCompletionsServer) -> None:
    fake.script(text("a"), Stall())
    upstream = make(fake, max_concurrency=1, queue_timeout=0.2)
    try:
        holder = upstream.generate(REQUEST)
        assert await anext(holder) == TextDelta("a")
        with pytest.raises(UpstreamError) as info:
            async for _ in upstream.generate(REQUEST):
                pass
        assert (info.value.code, info.value.before_first_token) == ("rate_limited", True)
        assert "busy" in info.value.message
        await holder.aclose()
    finally:
        await upstream.aclose()


async def test_list_models_and_start_discovery(fake: FakeChatCompletionsServer) -> None:
    upstream = ChatCompletionsUpstream(fake.url, name="fake")
    try:
        assert upstream.models == []
        await upstream.start()
        assert upstream.models == ["fake-model"]
        assert await upstream.list_models() == ["fake-model"]
    finally:
        await upstream.aclose()


async def test_start_on_unreachable_upstream_does_not_raise() -> None:
    upstream = ChatCompletionsUpstream(f"http://127.0.0.1:{free_port()}/v1", name="x")
    await upstream.start()
    assert upstream.models == []
    await upstream.aclose()


def test_parse_retry_after() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("  1.5 ") == 1.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past

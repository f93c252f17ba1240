"""The SIMULATED scripted backend and the upstream factory."""

from __future__ import annotations

import json

import pytest

from respstream.server.tools.specs import TOOL_SPECS
from respstream.server.upstream.base import (
    Chunk,
    Finish,
    GenerationRequest,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    UpstreamError,
)
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream
from respstream.server.upstream.factory import build_upstream
from respstream.server.upstream.responses.adapter import ResponsesNativeUpstream
from respstream.server.upstream.scripted import ScriptedUpstream, parse_scripted_spec

USER: list[dict[str, object]] = [{"role": "user", "content": "what is 2+2?"}]


async def run(upstream: ScriptedUpstream, request: GenerationRequest) -> list[Chunk]:
    return [chunk async for chunk in upstream.generate(request)]


async def test_text_deltas() -> None:
    chunks = await run(ScriptedUpstream.from_spec("scripted:3"), GenerationRequest(model="scripted", messages=USER))
    assert chunks[:3] == [TextDelta("The"), TextDelta(" quick"), TextDelta(" brown")]
    finish = chunks[3]
    assert isinstance(finish, Finish) and finish.reason == "stop" and finish.usage is not None
    assert finish.usage.output_tokens == 3 and len(chunks) == 4


async def test_server_tool_call_then_text_after_tool_result() -> None:
    upstream = ScriptedUpstream.from_spec("scripted:2?tool=calculator")
    offered = [TOOL_SPECS["calculator"]]
    chunks = await run(upstream, GenerationRequest(model="scripted", messages=USER, tools=offered))
    calls = [c for c in chunks if isinstance(c, ToolCallDelta)]
    assert calls[0].name == "calculator" and calls[0].call_id and calls[0].index == 0
    assert json.loads("".join(c.arguments for c in calls)) == {"expression": "2+2"}
    last = chunks[-1]
    assert isinstance(last, Finish) and last.reason == "tool_calls"
    followup: list[dict[str, object]] = [
        *USER,
        {"role": "assistant", "tool_calls": []},
        {"role": "tool", "tool_call_id": "x", "content": "4"},
    ]
    chunks = await run(upstream, GenerationRequest(model="scripted", messages=followup, tools=offered))
    assert [c for c in chunks if isinstance(c, TextDelta)] == [TextDelta("The"), TextDelta(" quick")]


async def test_client_function_tool_arguments_follow_schema() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "unit": {"enum": ["c", "f"]}},
                "required": ["city", "days", "unit"],
            },
        },
    }
    upstream = ScriptedUpstream.from_spec("scripted:1?tool=get_weather")
    chunks = await run(upstream, GenerationRequest(model="scripted", messages=USER, tools=[tool]))
    args = "".join(c.arguments for c in chunks if isinstance(c, ToolCallDelta))
    assert json.loads(args) == {"city": "example", "days": 1, "unit": "c"}


@pytest.mark.parametrize("fail_at", [0, 2, 5])
async def test_fail_at(fail_at: int) -> None:
    upstream = ScriptedUpstream.from_spec(f"scripted:5?fail_at={fail_at}")
    got: list[Chunk] = []
    with pytest.raises(UpstreamError) as info:
        async for chunk in upstream.generate(GenerationRequest(model="scripted", messages=USER)):
            got.append(chunk)
    assert len(got) == fail_at and all(isinstance(c, TextDelta) for c in got)
    assert info.value.code == "upstream_error" and info.value.before_first_token is (fail_at == 0)


async def test_reasoning_and_length_limit() -> None:
    upstream = ScriptedUpstream.from_spec("scripted:10?reasoning=2")
    chunks = await run(upstream, GenerationRequest(model="scripted", messages=USER, max_output_tokens=4))
    assert chunks[:2] == [ReasoningDelta("thinking"), ReasoningDelta(" thinking")]
    assert len([c for c in chunks if isinstance(c, TextDelta)]) == 4
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "length"


async def test_delay_is_applied() -> None:
    import time

    upstream = ScriptedUpstream.from_spec("scripted:3?delay_ms=20")
    started = time.perf_counter()
    await run(upstream, GenerationRequest(model="scripted", messages=USER))
    assert time.perf_counter() - started >= 0.055


@pytest.mark.parametrize(
    "spec", ["scripted:x", "scripted:3?delay_ms=fast", "scripted:3?bogus=1", "scripted:-1"], ids=str
)
def test_bad_scripted_specs(spec: str) -> None:
    with pytest.raises(ValueError, match="scripted upstream spec"):
        parse_scripted_spec(spec)


def test_factory() -> None:
    scripted = build_upstream("scripted:200?delay_ms=50&tool=web_search", connect_timeout=3)
    assert isinstance(scripted, ScriptedUpstream)
    assert (scripted.deltas, scripted.delay, scripted.tool, scripted.models) == (200, 0.05, "web_search", ["scripted"])
    assert isinstance(build_upstream("scripted"), ScriptedUpstream)
    http = build_upstream("http://127.0.0.1:8000/v1", api_key="k", idle_timeout=9, models=["m1"])
    # (a plain URL is probed at start(): the native adapter, Chat Completions until it knows better)
    assert isinstance(http, ResponsesNativeUpstream) and http.api_mode == "auto"
    assert (http.name, http.base_url, http.idle_timeout, http.models) == (
        "127.0.0.1:8000",
        "http://127.0.0.1:8000/v1",
        9,
        ["m1"],
    )
    named = build_upstream("https://api.example.com/v1/", name="openai")
    assert named.name == "openai"
    embedded = build_upstream("embedded", deadline=30)
    assert isinstance(embedded, EmbeddedUpstream) and embedded.model_size == "large"
    assert embedded.models == ["qwen2.5-coder-1.5b-instruct"]  # from the GGUF metadata (or the catalog if absent)
    small = build_upstream("embedded:small")
    assert isinstance(small, EmbeddedUpstream) and small.model_size == "small"
    assert "smollm2-135m-instruct" in small.models
    sized = build_upstream("embedded", model_size="medium")
    assert isinstance(sized, EmbeddedUpstream) and sized.model_size == "medium"
    with pytest.raises(ValueError, match="unknown model size 'huge'"):
        build_upstream("embedded:huge")
    with pytest.raises(ValueError, match="unknown upstream"):
        build_upstream("ftp://nope")

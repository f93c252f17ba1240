"""Forced tool calls and structured output on llama.cpp's /v1/messages with a Hermes-style template
(upstream/anthropic/prefill.py): what the adapter sends (a forced ``tool_choice`` and an assistant prefill holding the
call opener; structured output as a forced answer tool) and how the stream is read (the first complete call ends it;
the answer tool's input is the answer text; a call cut mid-arguments is never presented). No model, no network: the
bodies are built in-process and the streams are made here in llama.cpp's shape (its blocks all stop at the end), as
measured from it; the same paths run against the real llama.cpp in test_embedded_forced.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from respstream.server.http_errors import HTTPError
from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.anthropic.body import AnthropicBody
from respstream.server.upstream.anthropic.prefill import ANSWER_TOOL, prefilled_of
from respstream.server.upstream.anthropic.stream import AnthropicStream
from respstream.server.upstream.base import Finish, GenerationRequest, TextDelta, ToolCallDelta
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream
from respstream.server.upstream.provider_tools import RefusedField

from .simulated_anthropic import Reply, SimulatedAnthropic

OPENER = "<tool_call>\n"
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True}}
WEATHER = {"type": "function", "function": {"name": "weather", "description": "Weather for a city",
                                            "parameters": SCHEMA}}
PREFILL = {"role": "assistant", "content": OPENER}


def request(**fields: Any) -> GenerationRequest:
    return GenerationRequest(model="m", messages=[{"role": "user", "content": "Weather in Paris?"}], **fields)


def llama() -> AnthropicUpstream:
    return AnthropicUpstream("http://127.0.0.1:9", name="messages", models=["m"], constrained=False,
                             forced_call_prefix=OPENER)


def test_a_forced_tool_is_sent_forced_after_the_call_opener() -> None:
    body = llama().body(request(tools=[WEATHER], tool_choice="required"))
    assert body["tool_choice"] == {"type": "any"} and body["messages"][-1] == PREFILL
    other = {"type": "function", "function": {"name": "time", "parameters": SCHEMA}}
    named = llama().body(request(tools=[other, WEATHER], tool_choice={"type": "function",
                                                                      "function": {"name": "weather"}}))
    assert named["tool_choice"] == {"type": "tool", "name": "weather"} and named["messages"][-1] == PREFILL
    assert [t["name"] for t in named["tools"]] == ["weather"]  # (llama.cpp loses the name: only it is offered)
    assert prefilled_of(named, OPENER).single_call and prefilled_of(named, OPENER).answer_tool is None


def test_auto_is_sent_as_it_is() -> None:
    body = llama().body(request(tools=[WEATHER], tool_choice="auto"))
    assert body["tool_choice"] == {"type": "auto"} and body["messages"][-1]["role"] == "user"
    assert not prefilled_of(body, OPENER).single_call


def test_structured_output_is_a_forced_answer_tool() -> None:
    body = llama().body(request(options={"response_format": JSON_SCHEMA}))
    assert "output_config" not in body
    assert body["tools"] == [{"name": ANSWER_TOOL, "description": body["tools"][0]["description"],
                              "input_schema": SCHEMA}]
    assert body["tool_choice"] == {"type": "tool", "name": ANSWER_TOOL} and body["messages"][-1] == PREFILL
    assert prefilled_of(body, OPENER).answer_tool == ANSWER_TOOL
    # with client tools under auto, any call is forced (a client tool, or the answer)
    both = llama().body(request(tools=[WEATHER], options={"response_format": JSON_SCHEMA}))
    assert [t["name"] for t in both["tools"]] == ["weather", ANSWER_TOOL] and both["tool_choice"] == {"type": "any"}


@pytest.mark.parametrize(("field", "fields", "messages"), [
    ("text.format.schema", {"options": {"response_format": {"type": "json_schema", "json_schema": {
        "name": "list", "schema": {"type": "array", "items": {"type": "string"}}}}}}, None),
    ("tools", {"tools": [{"type": "function", "function": {"name": ANSWER_TOOL, "parameters": SCHEMA}}],
               "options": {"response_format": JSON_SCHEMA}}, None),
    ("input", {"tools": [WEATHER], "tool_choice": "required"},
     [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Let me see."}]),
    ("text.format", {"options": {"response_format": {"type": "json_object"}}}, None),
])
def test_what_cannot_be_forced_is_refused(field: str, fields: dict[str, Any],
                                          messages: list[dict[str, Any]] | None) -> None:
    asked = request(**fields)
    if messages is not None:
        asked.messages = messages
    with pytest.raises(RefusedField) as refused:
        llama().body(asked)
    assert refused.value.field == field
    with pytest.raises(HTTPError) as answered:  # the embedded kind on the large model, before it is loaded
        EmbeddedUpstream(api="anthropic", model_size="large").check_request(asked)
    assert answered.value.status == 400 and answered.value.param == field


def test_the_embedded_kind_forces_on_qwen_only() -> None:
    assert EmbeddedUpstream(api="anthropic", model_size="large").forced_call_prefix == OPENER
    assert EmbeddedUpstream(api="anthropic", model_size="medium").forced_call_prefix == OPENER
    assert EmbeddedUpstream(api="anthropic", model_size="small").forced_call_prefix is None
    EmbeddedUpstream(api="anthropic", model_size="large").check_request(
        request(tools=[WEATHER], tool_choice="required", options={"response_format": JSON_SCHEMA}))


# -- streams in llama.cpp's shape ------------------------------------------------------------------------------------

def sse(*events: dict[str, Any]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def tool_block(index: int, name: str, arguments: str) -> list[dict[str, Any]]:
    half = len(arguments) // 2
    return [{"type": "content_block_start", "index": index,
             "content_block": {"type": "tool_use", "id": f"call{index}", "name": name}},
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": arguments[:half]}},
            {"type": "content_block_delta", "index": index,
             "delta": {"type": "input_json_delta", "partial_json": arguments[half:]}}]


START = {"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 0}}}


def read(data: bytes, **options: Any) -> tuple[list[Any], AnthropicStream]:
    stream = AnthropicStream(name="llama", **options)
    body = AnthropicBody(stream)
    out: list[Any] = []
    for at in range(0, len(data), 7):
        out += body.feed(data[at:at + 7])
        if stream.done:
            break
    else:
        out += body.end()
    return out, stream


def test_the_first_complete_call_ends_a_forced_stream() -> None:
    data = sse(START, *tool_block(0, "weather", '{"city": "Paris"}'), *tool_block(1, "weather", '{"city": "Par'))
    out, stream = read(data, single_call=True)
    assert stream.done and stream.cut and stream.failure is None
    assert out == [ToolCallDelta(0, call_id="call0", name="weather", arguments='{"city": "Paris"}'),
                   Finish(reason="tool_calls", usage=out[-1].usage)]
    assert out[-1].usage.input_tokens == 12


def test_the_answer_tool_is_the_answer_text() -> None:
    data = sse(START, *tool_block(0, ANSWER_TOOL, '{"city": "Paris"}'), *tool_block(1, ANSWER_TOOL, "{"))
    out, stream = read(data, single_call=True, answer_tool=ANSWER_TOOL)
    assert stream.cut and "".join(c.text for c in out if isinstance(c, TextDelta)) == '{"city": "Paris"}'
    assert not any(isinstance(c, ToolCallDelta) for c in out) and out[-1].reason == "stop"


def test_a_call_cut_at_max_tokens_is_never_presented() -> None:
    data = sse(START, *tool_block(0, "weather", '{"city": "Par'), {"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}},
               {"type": "message_stop"})
    out, stream = read(data, single_call=True)
    assert stream.done and not stream.cut
    assert out == [Finish(reason="length", usage=out[-1].usage)] and out[-1].usage.output_tokens == 9


# -- through the adapter, against the SIMULATED provider (request bodies checked against the anthropic SDK's types) --

async def test_the_adapter_sends_valid_bodies_and_keeps_one_call() -> None:
    paris = '{"city": "Paris"}'
    repeated = sse(START, *tool_block(0, "weather", paris), *tool_block(1, "weather", paris),
                   {"type": "content_block_stop", "index": 0}, {"type": "content_block_stop", "index": 1},
                   {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 40}},
                   {"type": "message_stop"})
    answer = sse(START, *tool_block(0, ANSWER_TOOL, '{"city": "Paris"}'), {"type": "content_block_stop", "index": 0},
                 {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
                 {"type": "message_stop"})
    with SimulatedAnthropic(["m"]) as sim:
        sim.replies.extend([Reply(repeated), Reply(answer)])
        adapter = AnthropicUpstream(sim.url, name="llama", models=["m"], constrained=False, sampling=True,
                                    forced_call_prefix=OPENER, retries=0)
        await adapter.start()
        try:
            forced = [c async for c in adapter.generate(request(tools=[WEATHER], tool_choice="required",
                                                                max_output_tokens=40))]
            structured = [c async for c in adapter.generate(request(options={"response_format": JSON_SCHEMA},
                                                                    max_output_tokens=40))]
        finally:
            await adapter.aclose()
    assert sim.problems == [], sim.problems
    assert [s.body["messages"][-1] for s in sim.requests] == [PREFILL, PREFILL]
    calls = [c for c in forced if isinstance(c, ToolCallDelta)]
    assert [(c.name, c.arguments) for c in calls] == [("weather", '{"city": "Paris"}')]
    assert isinstance(forced[-1], Finish) and forced[-1].reason == "tool_calls"
    assert "".join(c.text for c in structured if isinstance(c, TextDelta)) == '{"city": "Paris"}'
    assert isinstance(structured[-1], Finish) and structured[-1].reason == "stop"
    assert not any(isinstance(c, ToolCallDelta) for c in structured)

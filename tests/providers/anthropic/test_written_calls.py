"""Tool calls the model wrote as text under ``tool_choice`` auto on llama.cpp's /v1/messages (``constrained=False``,
the ``anthropic+embedded`` kind): recognised by the shared TextToolCalls (upstream/anthropic/text_calls.py) exactly
as on the Chat Completions path, never on a Claude upstream. The streams are made here in llama.cpp's shape (one
``text`` block streamed a token or so a delta, ``end_turn``), with the call shapes the Qwen sizes were seen writing
(a ```json fence, Hermes ``<tool_call>`` tags, bare JSON, a lead-in then a fence), and replayed by the SIMULATED
provider in random chunk sizes; every request body is checked against the ``anthropic`` SDK's types."""

from __future__ import annotations

import json
from typing import Any

import pytest

from respstream.server.upstream.anthropic.adapter import AnthropicUpstream
from respstream.server.upstream.anthropic.text_calls import written_calls_of
from respstream.server.upstream.base import Chunk, Finish, GenerationRequest, TextDelta, ToolCallDelta
from respstream.server.upstream.embedded.adapter import EmbeddedUpstream

from .made_streams import sse
from .simulated_anthropic import Reply, SimulatedAnthropic

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "weather", "description": "Weather for a city",
                                            "parameters": SCHEMA}}
CALL = '{"name": "weather", "arguments": {"city": "Paris"}}'
START = {"type": "message_start", "message": {"id": "msg_llama", "type": "message", "role": "assistant",
                                              "model": "m", "content": [], "stop_reason": None,
                                              "usage": {"input_tokens": 169, "output_tokens": 0}}}


def llama_text(text: str, *, stop: str = "end_turn", piece: int = 3) -> bytes:
    """A llama.cpp-shaped answer: one text block, ``piece`` characters a delta, then its stop reason."""
    deltas = [{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text[at:at + piece]}}
              for at in range(0, len(text), piece)]
    return sse([START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                *deltas, {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 20}},
                {"type": "message_stop"}])


def request(**fields: Any) -> GenerationRequest:
    fields.setdefault("tools", [WEATHER])
    fields.setdefault("tool_choice", "auto")
    return GenerationRequest(model="m", messages=[{"role": "user", "content": "Weather in Paris?"}],
                             max_output_tokens=64, **fields)


async def run(replies: list[bytes], requests: list[GenerationRequest], *, constrained: bool = False,
              text_tool_calls: bool = True, seed: int = 0) -> tuple[list[list[Chunk]], SimulatedAnthropic]:
    with SimulatedAnthropic(["m"], seed=seed) as sim:
        sim.replies.extend(Reply(body, max_chunk=9) for body in replies)
        adapter = AnthropicUpstream(sim.url, name="llama", models=["m"], constrained=constrained, sampling=True,
                                    text_tool_calls=text_tool_calls, retries=0)
        await adapter.start()
        try:
            out = [[c async for c in adapter.generate(asked)] for asked in requests]
        finally:
            await adapter.aclose()
    assert sim.problems == [], sim.problems
    return out, sim


def calls_of(chunks: list[Chunk]) -> list[tuple[int, str | None, dict[str, Any]]]:
    return [(c.index, c.name, json.loads(c.arguments)) for c in chunks if isinstance(c, ToolCallDelta)]


def text_of(chunks: list[Chunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


@pytest.mark.parametrize("written", [
    f"```json\n{CALL}\n```",
    f"<tool_call>\n{CALL}\n</tool_call>",
    CALL,
    f"  \n```\n{CALL}\n```\n",
    '{"name": "weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',  # (arguments as a JSON string)
    '{{"name": "weather", "arguments": {"city": "Paris"}}}',  # (the large model under the Agents SDK: measured)
])
@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_a_call_written_as_text_becomes_a_call(written: str, seed: int) -> None:
    (chunks,), _ = await run([llama_text(written)], [request()], seed=seed)
    assert calls_of(chunks) == [(0, "weather", {"city": "Paris"})]
    assert text_of(chunks) == ""  # (the fence or tag around it is dropped with it)
    call = next(c for c in chunks if isinstance(c, ToolCallDelta))
    assert call.call_id and call.call_id.startswith("call_")
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.input_tokens == 169


@pytest.mark.parametrize("call", [CALL, "{" + CALL + "}"])
async def test_a_lead_in_then_a_fenced_call_keeps_the_text_and_adds_the_call(call: str) -> None:
    written = f"I will look it up.\n```json\n{call}\n```"
    (chunks,), _ = await run([llama_text(written)], [request()])
    assert text_of(chunks) == written  # (streamed at once: the client already has it)
    assert calls_of(chunks) == [(0, "weather", {"city": "Paris"})]
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "tool_calls"


async def test_a_list_of_calls_becomes_calls_numbered_in_order() -> None:
    written = f'[{CALL}, {{"name": "weather", "arguments": {{"city": "Rome"}}}}]'
    (chunks,), _ = await run([llama_text(written)], [request()])
    assert calls_of(chunks) == [(0, "weather", {"city": "Paris"}), (1, "weather", {"city": "Rome"})]
    ids = [c.call_id for c in chunks if isinstance(c, ToolCallDelta)]
    assert len(set(ids)) == 2


@pytest.mark.parametrize(("written", "why"), [
    ('```json\n{"name": "stocks", "arguments": {"ticker": "X"}}\n```', "a tool not offered"),
    ('```json\n{"name": "weather", "arguments": {"town": "Paris"}}\n```', "arguments off the schema"),
    ('```json\n{"name": "weather", "arguments": {"city": "Par\n```', "arguments not whole JSON"),
    ('```python\nprint("weather")\n```', "code, not a call"),
    ("The weather in Paris is usually mild.", "an answer"),
])
async def test_anything_else_stays_text_unchanged(written: str, why: str) -> None:
    (chunks,), _ = await run([llama_text(written)], [request()])
    assert calls_of(chunks) == [], why
    assert text_of(chunks) == written, why
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "stop", why


async def test_a_call_cut_by_max_tokens_stays_text_and_the_turn_is_incomplete() -> None:
    written = '<tool_call>\n{"name": "weather", "arguments": {"city": "Pa'
    (chunks,), _ = await run([llama_text(written, stop="max_tokens")], [request()])
    assert calls_of(chunks) == [] and text_of(chunks) == written
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "length"


async def test_never_on_claude_nor_without_the_option_nor_with_tool_choice_none() -> None:
    fenced = f"```json\n{CALL}\n```"
    (claude,), _ = await run([llama_text(fenced)], [request()], constrained=True)  # (a real Anthropic upstream)
    (off,), _ = await run([llama_text(fenced)], [request()], text_tool_calls=False)
    (none,), sim = await run([llama_text(fenced)], [request(tool_choice="none")])
    assert "tools" not in sim.requests[0].body  # (llama.cpp reads no `none`: the tools are left out)
    for chunks in (claude, off, none):
        assert calls_of(chunks) == [] and text_of(chunks) == fenced
        assert isinstance(chunks[-1], Finish) and chunks[-1].reason == "stop"
    assert AnthropicUpstream("http://127.0.0.1:9", name="c", models=["m"], text_tool_calls=True).text_tool_calls \
        is False


async def test_only_allowed_tools_are_recognised() -> None:
    other = {"type": "function", "function": {"name": "time", "parameters": SCHEMA}}
    allowed = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "time"}]}
    written = f"```json\n{CALL}\n```"
    # (the pipeline offers only the allowed tools: the request the adapter gets holds `time` alone)
    (chunks,), sim = await run([llama_text(written)], [request(tools=[other], tool_choice=allowed)])
    assert [t["name"] for t in sim.requests[0].body["tools"]] == ["time"]
    assert calls_of(chunks) == [] and text_of(chunks) == written


async def test_a_namespace_tools_flattened_name_is_restored() -> None:
    dotted = {"type": "function", "function": {"name": "files.read", "parameters": SCHEMA}}
    probe = AnthropicUpstream("http://127.0.0.1:9", name="p", models=["m"], constrained=False)
    provider_name = probe.body(request(tools=[dotted]))["tools"][0]["name"]
    assert provider_name != "files.read"  # (the Messages API's name rule refuses the dot)
    written = f'<tool_call>\n{{"name": "{provider_name}", "arguments": {{"city": "Oslo"}}}}\n</tool_call>'
    (chunks,), _ = await run([llama_text(written)], [request(tools=[dotted])])
    assert calls_of(chunks) == [(0, "files.read", {"city": "Oslo"})]


async def test_the_round_trip_sends_the_call_back_as_tool_use_and_an_echo_stays_text() -> None:
    fenced = f"```json\n{CALL}\n```"
    (first,), _ = await run([llama_text(fenced)], [request()])
    call = next(c for c in first if isinstance(c, ToolCallDelta))
    second = request()
    second.messages = [*second.messages,
                       {"role": "assistant", "content": None, "tool_calls": [
                           {"id": call.call_id, "type": "function",
                            "function": {"name": "weather", "arguments": call.arguments}}]},
                       {"role": "tool", "tool_call_id": call.call_id, "content": "Sunny, 21 C"}]
    # the model echoes the answered call (a loop if made again), then the next turn answers in text
    (echo, answer), sim = await run([llama_text(fenced), llama_text("It is sunny, 21 C.")], [second, second])
    turns = sim.requests[0].body["messages"]  # (checked against the SDK's types: sim.problems is empty)
    assert turns[1]["content"][-1] == {"type": "tool_use", "id": call.call_id, "name": "weather",
                                       "input": {"city": "Paris"}}
    assert turns[2]["content"][0]["type"] == "tool_result" and turns[2]["content"][0]["tool_use_id"] == call.call_id
    assert calls_of(echo) == [] and text_of(echo) == fenced
    assert text_of(answer) == "It is sunny, 21 C." and calls_of(answer) == []


def test_text_is_held_only_while_it_may_become_a_call() -> None:
    names_body = {"tools": [{"name": "weather", "input_schema": SCHEMA}]}
    probe = AnthropicUpstream("http://127.0.0.1:9", name="p", models=["m"], constrained=False)
    from respstream.server.upstream.anthropic.request import tool_names

    reader = written_calls_of(names_body, request(), tool_names())
    assert reader is not None and probe.text_tool_calls is False  # (the option is off unless asked)
    assert reader.read([TextDelta("The")]) == [TextDelta("The")]  # an answer's first word passes at once
    reader = written_calls_of(names_body, request(), tool_names())
    assert reader is not None
    assert reader.read([TextDelta("```json\n{")]) == []  # may become a call: held
    held = reader.read([TextDelta('"x": 1}')])  # its first key is no call's: released, unchanged
    assert held == [TextDelta('```json\n{"x": 1}')]
    # bounded: a candidate that never closes is released once past the call limit
    reader = written_calls_of(names_body, request(), tool_names())
    assert reader is not None
    out = reader.read([TextDelta('{"name": "weather", "arguments": {"city": "' + "a" * (64 * 1024 + 1))])
    assert text_of(out).startswith('{"name": "weather"') and len(text_of(out)) > 64 * 1024
    assert written_calls_of({"tools": []}, request(), tool_names()) is None


def test_the_embedded_kind_turns_it_on() -> None:
    from respstream.server.upstream.embedded.adapter import _CHAT_API_ONLY, _LLAMA_MESSAGES

    for wanted in (True, False):
        embedded = EmbeddedUpstream(api="anthropic", model_size="large", text_tool_calls=wanted)
        # (the options start() gives the Anthropic adapter on anthropic+embedded)
        options = {k: v for k, v in embedded._adapter_options.items() if k not in _CHAT_API_ONLY}
        adapter = AnthropicUpstream("http://127.0.0.1:9/v1", name="e", models=["m"], **options, **_LLAMA_MESSAGES)
        assert adapter.text_tool_calls is wanted


async def test_a_written_call_then_a_native_tool_use_are_numbered_in_order() -> None:
    text = f"<tool_call>\n{CALL}\n</tool_call>"
    mixed = sse([START, {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                 {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
                 {"type": "content_block_stop", "index": 0},
                 {"type": "content_block_start", "index": 1,
                  "content_block": {"type": "tool_use", "id": "toolu_native", "name": "weather", "input": {}}},
                 {"type": "content_block_delta", "index": 1,
                  "delta": {"type": "input_json_delta", "partial_json": '{"city": "Rome"}'}},
                 {"type": "content_block_stop", "index": 1},
                 {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 30}},
                 {"type": "message_stop"}])
    (chunks,), _ = await run([mixed], [request()])
    assert calls_of(chunks) == [(0, "weather", {"city": "Paris"}), (1, "weather", {"city": "Rome"})]
    assert [c.call_id for c in chunks if isinstance(c, ToolCallDelta)][1] == "toolu_native"
    assert text_of(chunks) == "" and isinstance(chunks[-1], Finish) and chunks[-1].reason == "tool_calls"

"""A tool call the MODEL makes under ``tool_choice`` auto through llama.cpp's own ``POST /v1/messages``
(``anthropic+embedded:large``: Qwen2.5-Coder-1.5B through ``xllamacpp``, no simulated part). llama.cpp renders the
tools but the model writes its call as text (no ``tool_use``); the adapter recognises it
(upstream/anthropic/text_calls.py) and the round trip completes. What llama.cpp streamed is recorded as it sent it:
the call came in a ``text`` block, and nothing forced it (no prefill, ``tool_choice`` auto). Then the OpenAI Agents
SDK (unmodified), which sends ``tool_choice`` auto, runs a tool the model called that way. Needs the large model
(``make install-model``); four real turns, outputs capped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import ModelSettings, Runner

from fakes.server_thread import ServerThread
from interop.weather_agent import weather_agent

from .conftest import LARGE_MODEL_TIMEOUT, answer_tool_result, post

pytestmark = [pytest.mark.model, pytest.mark.slow]

WEATHER = {"type": "function", "name": "get_weather", "description": "Get the current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}}





def streamed_blocks(raw: bytes) -> tuple[list[str], str]:
    """The content block types llama.cpp started and the text it streamed, read from its SSE bytes."""
    kinds, text = [], []
    for line in raw.decode().splitlines():
        if not line.startswith("data: "):
            continue
        event = json.loads(line[6:])
        if event.get("type") == "content_block_start":
            kinds.append(event["content_block"]["type"])
        elif event.get("type") == "content_block_delta" and event["delta"].get("type") == "text_delta":
            text.append(event["delta"]["text"])
    return kinds, "".join(text)


def test_an_auto_call_written_as_text_is_made_and_its_round_trip_completes(
        large_gateway: tuple[ServerThread, str], llama_wire: dict[str, list[Any]]) -> None:
    server, model = large_gateway
    question = {"type": "message", "role": "user", "content": "What is the weather in Paris? Use the tool."}
    got, violations, response = post(server, {"model": model, "input": [question], "tools": [WEATHER],
                                              "tool_choice": "auto", "max_output_tokens": 64, "store": False,
                                              "temperature": 0}, timeout=LARGE_MODEL_TIMEOUT)
    assert response.status_code == 200, response.text
    kinds, text = streamed_blocks(b"".join(llama_wire["raw"]))
    print(f"llama.cpp streamed blocks {kinds}, text {text!r}")  # (the shape, for the docs)
    sent = llama_wire["bodies"][-1]
    assert sent["tool_choice"] == {"type": "auto"} and sent["messages"][-1]["role"] == "user"  # nothing forced
    assert violations == [] and got["status"] == "completed", (got["error"], got["output"])
    calls = [item for item in got["output"] if item["type"] == "function_call"]
    assert len(calls) == 1 and calls[0]["name"] == "get_weather", got["output"]
    assert "paris" in json.loads(calls[0]["arguments"])["city"].lower()
    # the model wrote it as text: llama.cpp sent no tool_use, and the call's JSON was in its text
    assert "tool_use" not in kinds and "get_weather" in text, (kinds, text)
    # the round trip: the call and its output go back as tool_use and tool_result, the model answers
    got = answer_tool_result(server, model, question, calls[0], [WEATHER])
    assert not [item for item in got["output"] if item["type"] == "function_call"], got["output"]  # no loop
    turns = llama_wire["bodies"][-1]["messages"]
    assert turns[1]["content"][-1] == {"type": "tool_use", "id": calls[0]["call_id"], "name": "get_weather",
                                       "input": json.loads(calls[0]["arguments"])}, turns
    assert turns[2]["content"][0]["type"] == "tool_result" and turns[2]["content"][0]["tool_use_id"] == \
        calls[0]["call_id"], turns


async def test_the_agents_sdk_runs_a_tool_the_model_called_under_auto(large_gateway: tuple[ServerThread, str],
                                                                      llama_wire: dict[str, list[Any]]) -> None:
    server, model = large_gateway
    calls: list[str] = []
    # (ModelSettings() sends no tool_choice: the Responses default, auto)
    agent, client = weather_agent(server.base_url, calls, model=model, timeout=300,
                                  settings=ModelSettings(max_tokens=64, temperature=0.0, store=False))
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=3)
    await client.close()
    kinds, text = streamed_blocks(b"".join(llama_wire["raw"]))
    print(f"llama.cpp streamed blocks {kinds}, text {text!r}")  # (the shape, for the docs)
    assert [city.lower() for city in calls] == ["paris"], (calls, result.raw_responses)  # the SDK ran the call
    assert isinstance(result.final_output, str) and result.final_output.strip(), result.raw_responses
    first = llama_wire["bodies"][0]
    assert first.get("tool_choice", {"type": "auto"}) == {"type": "auto"} and first["messages"][-1]["role"] == "user"
    assert "tool_use" not in kinds and "get_weather" in text, (kinds, text)  # (written as text, made a call)

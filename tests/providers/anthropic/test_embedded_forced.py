"""Model-made tool calls and structured output through llama.cpp's own ``POST /v1/messages``
(``anthropic+embedded:large``: Qwen2.5-Coder-1.5B through ``xllamacpp``, no simulated part): a forced tool turn whose
``tool_use`` the MODEL writes and whose round trip completes, a structured-output turn whose JSON validates against
the schema, and the OpenAI Agents SDK (unmodified) running a tool the model called. The adapter forces a call by an
assistant prefill of the template's call opener (upstream/anthropic/prefill.py); the stream's ``tool_use`` blocks are
recorded as llama.cpp sent them. Needs the large model (``make install-model``); 5 real turns, outputs capped."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from agents import Agent, ModelSettings, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from fakes.server_thread import ServerThread

from .conftest import LARGE_MODEL_TIMEOUT, answer_tool_result, post

pytestmark = [pytest.mark.model, pytest.mark.slow]

WEATHER = {"type": "function", "name": "weather", "description": "Get the current weather for a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                          "additionalProperties": False}}
CITY_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "sunny": {"type": "boolean"}},
               "required": ["city", "sunny"], "additionalProperties": False}





def test_a_forced_call_is_made_by_the_model_and_its_round_trip_completes(
        large_gateway: tuple[ServerThread, str], llama_wire: dict[str, list[Any]]) -> None:
    server, model = large_gateway
    question = {"type": "message", "role": "user", "content": "What is the weather in Paris?"}
    got, violations, response = post(server, {"model": model, "input": [question], "tools": [WEATHER],
                                              "tool_choice": "required", "max_output_tokens": 48, "store": False},
                                              timeout=LARGE_MODEL_TIMEOUT)
    assert response.status_code == 200, response.text
    assert violations == [] and got["status"] == "completed", (got["error"], got["output"])
    calls = [item for item in got["output"] if item["type"] == "function_call"]
    assert len(calls) == 1 and calls[0]["name"] == "weather", got["output"]
    assert isinstance(json.loads(calls[0]["arguments"])["city"], str)
    # the model wrote it: llama.cpp streamed a tool_use block with this id, after the forced prefill we sent
    blocks = llama_wire["blocks"]
    assert {"type": "tool_use", "id": calls[0]["call_id"], "name": "weather"} in blocks, blocks
    sent = llama_wire["bodies"][-1]
    assert sent["tool_choice"] == {"type": "any"} and sent["messages"][-1] == {"role": "assistant",
                                                                              "content": "<tool_call>\n"}
    # the round trip: the call and its output go back, the model answers
    answer_tool_result(server, model, question, calls[0], [WEATHER])
    turns = llama_wire["bodies"][-1]["messages"]
    assert turns[1]["content"][-1]["type"] == "tool_use" and turns[2]["content"][0]["type"] == "tool_result"


def test_structured_output_validates_against_the_schema(large_gateway: tuple[ServerThread, str],
                                                        llama_wire: dict[str, list[Any]]) -> None:
    server, model = large_gateway
    got, violations, response = post(server, {
        "model": model, "input": "Is it sunny in Paris today? It is.", "max_output_tokens": 48,
        "text": {"format": {"type": "json_schema", "name": "weather", "schema": CITY_SCHEMA, "strict": True}}},
        timeout=LARGE_MODEL_TIMEOUT)
    assert response.status_code == 200, response.text
    assert violations == [] and got["status"] == "completed", (got["error"], got["output"])
    answer = json.loads(got["output_text"])
    jsonschema.validate(answer, CITY_SCHEMA)
    assert not [item for item in got["output"] if item["type"] == "function_call"]  # (the answer is no call)
    assert any(block and block.get("type") == "tool_use" for block in llama_wire["blocks"]), llama_wire["blocks"]
    assert "output_config" not in llama_wire["bodies"][-1]


async def test_the_agents_sdk_runs_a_tool_the_model_called(large_gateway: tuple[ServerThread, str],
                                                           llama_wire: dict[str, list[Any]]) -> None:
    server, model = large_gateway
    set_tracing_disabled(True)  # tracing would try to upload to api.openai.com
    calls: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return f"sunny and 21 C in {city}"

    client = AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0, timeout=300)
    # tool_choice required on the first turn; the SDK resets it to auto once the tool ran (reset_tool_choice)
    agent = Agent(name="weather", instructions="Answer in one short sentence.", tools=[get_weather],
                  model=OpenAIResponsesModel(model=model, openai_client=client),
                  model_settings=ModelSettings(tool_choice="required", max_tokens=48, store=False))
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=3)
    await client.close()
    assert len(calls) == 1 and calls[0].strip(), calls  # the SDK ran the model's call
    assert isinstance(result.final_output, str) and result.final_output.strip(), result.raw_responses
    made = [b for b in llama_wire["blocks"] if b and b.get("type") == "tool_use"]
    assert len(made) == 1 and made[0]["name"] == "get_weather", llama_wire["blocks"]

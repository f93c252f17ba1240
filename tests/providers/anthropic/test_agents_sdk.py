"""The OpenAI Agents SDK (unmodified) through the gateway to the SIMULATED Anthropic provider: Claude thinks, calls
the agent's function tool, the SDK runs it and sends the whole turn back as input items (no previous_response_id);
the provider then sees the thinking block with its exact signature before the tool_use, and the tool_result right
after it, and the run ends with Claude's answer."""

from __future__ import annotations

from agents import ModelSettings, Runner
from openai.types.shared import Reasoning

from fakes.server_thread import ServerThread
from interop.weather_agent import weather_agent

from .conftest import MODELS
from .made_streams import text_stream, thinking_tool_stream
from .simulated_anthropic import Reply, SimulatedAnthropic


async def test_agents_sdk_tool_round_trip_keeps_the_signed_thinking(gateway: ServerThread,
                                                                     sim: SimulatedAnthropic) -> None:
    calls: list[str] = []
    sim.replies.extend([Reply(thinking_tool_stream("I should call get_weather.", "SIG-AGENTS", "get_weather",
                                                   {"city": "Paris"}, call_id="toolu_agents")),
                        Reply(text_stream("It is sunny and 21 C in Paris."))])
    agent, client = weather_agent(gateway.base_url, calls, model=MODELS[0], timeout=30,
                                  settings=ModelSettings(reasoning=Reasoning(effort="low", summary="auto"),
                                                         response_include=["reasoning.encrypted_content"]))
    result = await Runner.run(agent, "What is the weather in Paris?", max_turns=4)
    await client.close()
    assert calls == ["Paris"]
    assert result.final_output == "It is sunny and 21 C in Paris."
    assert sim.problems == [] and len(sim.requests) == 2
    turns = sim.requests[1].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"][0] == {"type": "thinking", "thinking": "I should call get_weather.",
                                      "signature": "SIG-AGENTS"}
    assert turns[1]["content"][1]["type"] == "tool_use" and turns[1]["content"][1]["id"] == "toolu_agents"
    assert turns[2]["content"][0] == {"type": "tool_result", "tool_use_id": "toolu_agents",
                                      "content": "sunny and 21 C in Paris"}

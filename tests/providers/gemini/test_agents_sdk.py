"""The OpenAI Agents SDK (a real client) running a function tool round trip against Gemini through the gateway:
the SIMULATED Gemini API answers the recorded thought-then-call stream (a thought summary, then a signed
``functionCall``), the SDK runs the tool and sends its whole history back as input items (reasoning items with
``encrypted_content`` included), and Gemini's second request carries the signature on that call, unchanged."""

from __future__ import annotations

from typing import Any

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from fakes.server_thread import ServerThread
from providers.gemini.conftest import CASES, PROVIDERS
from providers.gemini.simulated_gemini import Reply, SimulatedGemini, sse_body

CALL = next((c for c in CASES if c["case"] == "fantasy__thought-then-call.sse"), {})


async def test_an_agents_sdk_tool_round_trip_keeps_the_signature(fake: SimulatedGemini,
                                                                 gateway: ServerThread) -> None:
    fake.queue(Reply(200, (PROVIDERS / CALL["file"]).read_bytes()), Reply(200, sse_body(
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "It is sunny in Florence."}]},
                         "finishReason": "STOP"}]})))
    asked: list[str] = []

    @function_tool
    def weather(location: str) -> str:
        """Get weather information for a location."""
        asked.append(location)
        return "sunny, 24 C"

    set_tracing_disabled(True)  # (tracing would try to upload to api.openai.com)
    client = AsyncOpenAI(base_url=gateway.base_url, api_key="k", max_retries=0, timeout=30)
    agent = Agent(name="weather", instructions="Use the tool.", tools=[weather],
                  model=OpenAIResponsesModel(model=CALL["model"], openai_client=client))
    try:
        result: Any = await Runner.run(agent, CALL["request"]["input"], max_turns=3)
    finally:
        await client.close()
    assert asked == ["Florence, Italy"]
    assert result.final_output == "It is sunny in Florence."
    assert fake.invalid == [] and len(fake.requests) == 2
    contents = fake.requests[1][1]["contents"]
    signature = CALL["expect"]["reasoning"]["signatures"][0]["value"]
    model_turn = next(c for c in contents if c["role"] == "model")
    assert model_turn["parts"] == [{"functionCall": {"name": "weather", "args": {"location": "Florence, Italy"}},
                                    "thoughtSignature": signature}]
    answered = contents[contents.index(model_turn) + 1]["parts"][0]["functionResponse"]
    assert answered == {"name": "weather", "response": {"output": "sunny, 24 C"}}

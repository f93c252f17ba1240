"""The OpenAI Agents SDK agent the agent tests run against the gateway: one function tool, ``get_weather``, which
records each city it is asked for (so a test can say the SDK ran it) and answers from a template; and the event
types of a streamed run (what a test asserts on)."""

from __future__ import annotations

from typing import Any

from agents import (
    Agent,
    FunctionTool,
    ModelSettings,
    OpenAIResponsesModel,
    RunResultStreaming,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

__all__ = ["WEATHER_INSTRUCTIONS", "event_types", "get_weather_tool", "weather_agent"]

WEATHER_INSTRUCTIONS = "Answer weather questions with the get_weather tool."


def get_weather_tool(calls: list[str], answer: str = "sunny and 21 C in {city}") -> FunctionTool:
    """``get_weather(city)``: appends ``city`` to ``calls`` and returns ``answer`` with it."""

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        calls.append(city)
        return answer.format(city=city)

    return get_weather


def weather_agent(base_url: str, calls: list[str], *, model: str = "auto", timeout: float = 20,
                  instructions: str = WEATHER_INSTRUCTIONS,
                  settings: ModelSettings | None = None) -> tuple[Agent[Any], AsyncOpenAI]:
    """The agent with ``get_weather_tool(calls)`` on the gateway at ``base_url`` (tracing off: it would upload to
    api.openai.com), and its client, which the test closes."""
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base_url, api_key="test-key", max_retries=0, timeout=timeout)
    agent = Agent(name="weather", instructions=instructions, tools=[get_weather_tool(calls)],
                  model=OpenAIResponsesModel(model=model, openai_client=client),
                  model_settings=settings or ModelSettings())
    return agent, client


async def event_types(result: RunResultStreaming) -> tuple[list[str], list[str]]:
    """A streamed run read to its end: (its raw Responses event types, its run item types), in order."""
    raw_types: list[str] = []
    item_types: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event":
            raw_types.append(event.data.type)
        elif event.type == "run_item_stream_event":
            item_types.append(event.item.type)
    return raw_types, item_types

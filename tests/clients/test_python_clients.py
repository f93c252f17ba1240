"""Real, unmodified Python clients against the gateway (the ``test`` extra pins them): the OpenAI Agents SDK (SSE
and its WebSocket transport), LangChain's ChatOpenAI on the Responses API, pydantic-ai's OpenAIResponsesModel and
litellm's ``responses()`` (with and without ``stream``). Each case asserts what the client itself returned: the
scripted upstream's text, the tool call's name and arguments, no exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from interop.gateways import Gateway

from .matrix import ANSWER, PROMPT, WEATHER_ARGUMENTS, cases

pytestmark = pytest.mark.clients
KEY = "test-key"
_calls: list[str] = []


def get_weather(city: str) -> str:
    """Weather for a city."""
    _calls.append(city)
    return f"sunny in {city}"


def assert_ran_get_weather() -> None:
    """The client ran the tool once itself, with the arguments the scripted upstream built."""
    assert _calls == [WEATHER_ARGUMENTS["city"]]


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    _calls.clear()


@pytest.mark.parametrize(("check", "gateway"), cases("Agents SDK (Python)"), indirect=["gateway"])
async def test_agents_python(check: str, gateway: Gateway) -> None:
    from agents import (
        Agent,
        OpenAIResponsesModel,
        OpenAIResponsesWSModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # tracing would upload to the vendor's host
    client = AsyncOpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, timeout=20)
    model_class = OpenAIResponsesWSModel if check == "run_websocket" else OpenAIResponsesModel
    model = model_class(model="auto", openai_client=client)
    agent = Agent(name="planner", instructions="Use get_weather first.", tools=[function_tool(get_weather)],
                  model=model)
    try:
        if check == "run_sse":
            result: Any = await Runner.run(agent, PROMPT, max_turns=4)
        else:
            result = Runner.run_streamed(agent, PROMPT, max_turns=4)
            async for _event in result.stream_events():
                pass
    finally:
        if isinstance(model, OpenAIResponsesWSModel):
            await model.close()
        await client.close()
    calls = [item.raw_item for item in result.new_items if item.type == "tool_call_item"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", WEATHER_ARGUMENTS)]
    assert_ran_get_weather()
    assert result.final_output == ANSWER


@pytest.mark.parametrize(("check", "gateway"), cases("LangChain (Python)"), indirect=["gateway"])
def test_langchain(check: str, gateway: Gateway) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="auto", base_url=gateway.base_url, api_key=KEY, use_responses_api=True,  # type: ignore[arg-type]
                     max_retries=0, timeout=20)
    if check == "invoke":
        assert llm.invoke(PROMPT).text == ANSWER
    elif check == "stream":
        assert "".join(chunk.text for chunk in llm.stream(PROMPT)) == ANSWER
    else:
        message = llm.bind_tools([get_weather]).invoke(PROMPT)
        assert [(c["name"], c["args"]) for c in message.tool_calls] == [("get_weather", WEATHER_ARGUMENTS)]


@pytest.mark.parametrize(("check", "gateway"), cases("pydantic-ai (Python)"), indirect=["gateway"])
async def test_pydantic_ai(check: str, gateway: Gateway) -> None:
    from openai import AsyncOpenAI
    from pydantic_ai.models.openai import OpenAIResponsesModel
    from pydantic_ai.providers.openai import OpenAIProvider

    client = AsyncOpenAI(base_url=gateway.base_url, api_key=KEY, max_retries=0, timeout=20)
    async with client:  # the provider would leave its own client's sockets to the garbage collector
        await _pydantic_ai_check(check, OpenAIResponsesModel("auto", provider=OpenAIProvider(openai_client=client)))


async def _pydantic_ai_check(check: str, model: Any) -> None:
    from pydantic import BaseModel
    from pydantic_ai import Agent, NativeOutput
    from pydantic_ai.messages import ToolCallPart

    class Forecast(BaseModel):
        city: str
        forecast: str

    if check == "run":
        assert (await Agent(model).run(PROMPT)).output == ANSWER
    elif check == "run_stream":
        async with Agent(model).run_stream(PROMPT) as streamed:
            assert await streamed.get_output() == ANSWER
    elif check == "native_output":
        result: Any = await Agent(model, output_type=NativeOutput(Forecast)).run(PROMPT)
        assert result.output == Forecast.model_validate_json(ANSWER)
    else:
        result = await Agent(model, tools=[get_weather]).run(PROMPT)
        calls = [part for message in result.all_messages() for part in message.parts if isinstance(part, ToolCallPart)]
        assert [(c.tool_name, c.args_as_dict()) for c in calls] == [("get_weather", WEATHER_ARGUMENTS)]
        assert_ran_get_weather()
        assert result.output == ANSWER


# litellm's own logging serializes the usage it rebuilt in Chat Completions shape into its Responses usage model
# (its pydantic warning, turned into an error by filterwarnings=error, is caught and logged by litellm itself).
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize(("check", "gateway"), cases("litellm (Python)"), indirect=["gateway"])
def test_litellm(check: str, gateway: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price list from the internet
    import litellm

    options: dict[str, Any] = {"model": "openai/auto", "input": PROMPT, "api_base": gateway.base_url, "api_key": KEY}
    if check == "responses_json":
        response: Any = litellm.responses(**options)
        assert response.status == "completed"
        texts = [part.text for item in response.output if item.type == "message" for part in item.content]
        assert "".join(texts) == ANSWER
    else:
        events = list(litellm.responses(**options, stream=True))
        types = [event.type for event in events]
        assert types[-1] == "response.completed", types
        assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == ANSWER

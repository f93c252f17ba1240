"""A forced ``tool_choice`` is kept even when the model answers in text (issue #29: instructor ``RESPONSES_TOOLS`` on
the embedded model got ``completed`` with plain JSON text and no call). The official ``openai`` SDK against our
gateway over loopback; the SIMULATED scripted upstream ignores ``tool_choice`` and answers with fixed text."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import openai
import pytest
from openai import OpenAI

from .gateways import Gateway, serve

WEATHER: Any = {"type": "function", "name": "get_weather", "description": "Weather for a city.", "strict": False,
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
SCHEMA: Any = {"format": {"type": "json_schema", "name": "weather", "strict": True, "schema": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}}}
FORCED: Any = {"type": "function", "name": "get_weather"}
CLOCK: Any = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}


def _upstream(text: str) -> str:
    return f"scripted:0?delay_ms=1&text={quote(text)}"


@pytest.fixture(scope="module", params=["platform", "openai", "openresponses"])
def json_text(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, _upstream('```json\n{"city": "Paris"}\n```'))


@pytest.fixture(scope="module", params=["platform", "openai"])
def prose(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, _upstream("It is sunny in Paris."))


@pytest.fixture(scope="module", params=["platform", "openai"])
def written_call(request: pytest.FixtureRequest) -> Iterator[Gateway]:
    yield from serve(request.param, _upstream('{"name": "get_weather", "arguments": {"city": "Oslo"}}'))


def _client(gateway: Gateway) -> OpenAI:
    return OpenAI(base_url=gateway.base_url, api_key="k", max_retries=0, timeout=20)


@pytest.mark.parametrize("choice", [FORCED, "required"])
def test_json_text_becomes_the_forced_call(json_text: Gateway, choice: Any) -> None:
    with _client(json_text) as client:
        response = client.responses.create(model="auto", input="Weather in Paris?", tools=[WEATHER],
                                           tool_choice=choice, text=SCHEMA, stream=False)
    assert response.status == "completed"
    call = response.output[-1]
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}


def test_streamed_forced_call_is_well_formed(json_text: Gateway) -> None:
    with _client(json_text) as client, client.responses.stream(
            model="auto", input="Weather?", tools=[WEATHER], tool_choice=FORCED, text=SCHEMA) as stream:
        final = stream.get_final_response()
    assert [item.type for item in final.output][-1] == "function_call"


def test_prose_under_a_forced_tool_fails_clearly(prose: Gateway) -> None:
    with _client(prose) as client:
        response = client.responses.create(model="auto", input="Weather?", tools=[WEATHER], tool_choice=FORCED,
                                           stream=False)
        assert response.status == "failed"
        assert response.error is not None and response.error.code == "tool_choice_not_followed"  # type: ignore[comparison-overlap]
        assert "get_weather" in response.error.message
        with pytest.raises(openai.APIError, match="get_weather"):
            list(client.responses.create(model="auto", input="Weather?", tools=[WEATHER], tool_choice=FORCED,
                                         stream=True))


def test_auto_tool_choice_keeps_the_text(prose: Gateway) -> None:
    with _client(prose) as client:
        response = client.responses.create(model="auto", input="Weather?", tools=[WEATHER], stream=False)
    assert response.status == "completed" and response.output_text == "It is sunny in Paris."


def test_required_with_several_tools_takes_a_call_written_as_json(written_call: Gateway) -> None:
    with _client(written_call) as client:
        response = client.responses.create(model="auto", input="Use one of the tools.", tools=[CLOCK, WEATHER],
                                           tool_choice="required", stream=False)
    call = response.output[-1]
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Oslo"}


def test_required_with_several_tools_and_prose_fails(prose: Gateway) -> None:
    with _client(prose) as client:
        # (not a question of fresh facts: in platform a grounding web_search would meet "required" by itself)
        response = client.responses.create(model="auto", input="Use one of the tools.", tools=[CLOCK, WEATHER],
                                           tool_choice="required", stream=False)
    assert response.status == "failed" and response.error is not None
    assert "get_time" in response.error.message and "get_weather" in response.error.message

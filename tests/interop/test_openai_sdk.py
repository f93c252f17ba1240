"""The official ``openai`` Python SDK (sync and async) against our gateway, in both dialects, on loopback.

What the SDK needs from us, as found here:
- ``stream=True`` calls send ``Accept: text/event-stream``; non-stream calls send ``Accept: application/json``
  (DESIGN §4: that is how the gateway tells a JSON request from a seed-style default-stream one).
- The ``responses.stream()`` helper rebuilds a snapshot from ``response.created`` and indexes
  ``snapshot.output[event.output_index]``: every item/part/delta event must carry ``output_index`` (and
  ``content_index`` for parts), and ``response.created`` must carry a Response with ``output: []``.
- Unknown events (``response.routing.completed`` in the platform dialect) come out as the wrong typed class but
  do not break iteration or the helper.
- ``retrieve(id, stream=True, starting_after=N)`` sends the cursor to the server and relies on it (no client-side
  filtering), so the gateway must resume exactly after ``N``.
- In the platform dialect, server-side tools (``web_search``) are ``function_call`` items carrying ``output``; the
  SDK types them as ordinary function calls, so a client must pick its own calls by name.
- Errors before streaming must be a JSON ``{"error": {...}}`` envelope with the HTTP status: the SDK maps 400/404
  to ``BadRequestError``/``NotFoundError`` and exposes ``error.code``.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from .gateways import Gateway

WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "strict": False,
}


def sync_client(gateway: Gateway) -> OpenAI:
    return OpenAI(base_url=gateway.base_url, api_key="test-key", max_retries=0, timeout=20)


def async_client(gateway: Gateway) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=gateway.base_url, api_key="test-key", max_retries=0, timeout=20)


def assert_well_formed(events: list[Any]) -> str:
    """Checks a raw SDK event list; returns the text the deltas carried."""
    types = [event.type for event in events]
    assert types[0] == "response.created"
    assert types[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed
    assert events[-1].response.output_text == streamed
    return streamed


def test_sync_create_stream(text_gateway: Gateway) -> None:
    with sync_client(text_gateway) as client:
        events: list[Any] = list(client.responses.create(model="auto", input="Say hello.", stream=True))
    assert_well_formed(events)


async def test_async_create_stream(text_gateway: Gateway) -> None:
    async with async_client(text_gateway) as client:
        stream = await client.responses.create(model="auto", input="Say hello.", stream=True)
        events: list[Any] = [event async for event in stream]
    assert_well_formed(events)


def test_sync_stream_helper(text_gateway: Gateway) -> None:
    with sync_client(text_gateway) as client, client.responses.stream(model="auto", input="Say hello.") as stream:
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.status == "completed"
    assert final.output_text == "".join(deltas) != ""


async def test_async_stream_helper(text_gateway: Gateway) -> None:
    client = async_client(text_gateway)
    async with client, client.responses.stream(model="auto", input="Say hello.") as stream:
        deltas = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert final.status == "completed"
    assert final.output_text == "".join(deltas) != ""


def test_sync_retrieve_resumes_after_starting_after(text_gateway: Gateway) -> None:
    with sync_client(text_gateway) as client:
        created = client.responses.create(model="auto", input="Say hello.", stream=True, background=True)
        original: list[Any] = list(created)
        response_id = original[0].response.id
        resumed: list[Any] = list(client.responses.retrieve(response_id, stream=True, starting_after=3))
        replay: list[Any] = list(client.responses.retrieve(response_id, stream=True))
    assert [e.sequence_number for e in resumed] == [e.sequence_number for e in original[4:]]
    assert [e.type for e in resumed] == [e.type for e in original[4:]]
    assert [e.sequence_number for e in replay] == list(range(len(original)))
    assert resumed[-1].type == "response.completed"


async def test_async_retrieve_resumes_after_starting_after(text_gateway: Gateway) -> None:
    async with async_client(text_gateway) as client:
        stream = await client.responses.create(model="auto", input="Say hello.", stream=True, background=True)
        original: list[Any] = [event async for event in stream]
        last = original[-1].sequence_number
        resumed_stream = await client.responses.retrieve(original[0].response.id, stream=True, starting_after=last - 2)
        resumed: list[Any] = [event async for event in resumed_stream]
    assert [e.sequence_number for e in resumed] == [last - 1, last]
    assert resumed[-1].response.output_text == original[-1].response.output_text


def test_sync_function_tool_round_trip(tool_gateway: Gateway) -> None:
    with sync_client(tool_gateway) as client:
        with client.responses.stream(model="auto", input="Weather in Paris?", tools=[WEATHER_TOOL]) as stream:
            first = stream.get_final_response()
        # In the platform dialect the server's own web_search (the prompt asks for fresh facts) is a function_call
        # item too, with its output attached: a client must skip the calls it did not define.
        calls = [item for item in first.output if item.type == "function_call" and item.name == "get_weather"]
        assert len(calls) == 1
        follow_up: list[Any] = list(client.responses.create(
            model="auto",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": "sunny, 21 C"}],
            tools=[WEATHER_TOOL],
            stream=True,
        ))
    assert follow_up[-1].type == "response.completed"
    assert follow_up[-1].response.output_text


@pytest.mark.parametrize(
    ("model", "error"), [("no-such-model", (openai.BadRequestError, openai.NotFoundError))], ids=["unknown-model"]
)
def test_errors_before_streaming_are_typed(text_gateway: Gateway, model: str, error: tuple[type[Exception]]) -> None:
    with sync_client(text_gateway) as client, pytest.raises(error) as caught:
        client.responses.create(model=model, input="hi", stream=True)
    assert isinstance(caught.value, openai.APIStatusError)
    assert caught.value.code == "model_not_found"

"""Tool calls written as answer text become real calls (server/upstream/text_tool_calls.py); the rest stays text."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from respstream.server.upstream.base import Chunk, Finish, TextDelta, ToolCallDelta
from respstream.server.upstream.text_tool_calls import (
    TextToolCalls,
    answered_calls,
    text_tool_call_stream,
    written_call,
)
from respstream.server.upstream.tool_schemas import offered_functions, schema_errors

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
           "required": ["city"], "additionalProperties": False}
FUNCTIONS = {"get_weather": WEATHER}


def run(pieces: list[str], functions: dict[str, dict[str, object]] | None = None) -> list[Chunk]:
    detector = TextToolCalls(FUNCTIONS if functions is None else functions)
    out: list[Chunk] = []
    for piece in pieces:
        out.extend(detector.feed(piece))
    out.extend(detector.finish())
    return out


def split(text: str, size: int = 3) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)]


@pytest.mark.parametrize("text", [
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    '  ```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\n',
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
    '```\n{"name":"get_weather","parameters":{"city":"Paris"}}\n```',
    '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',
    '{{"name": "get_weather", "arguments": {"city": "Paris"}}}',  # (the braces of Qwen2.5's template text)
])
def test_a_call_written_as_text_becomes_a_tool_call(text: str) -> None:
    for pieces in ([text], split(text, 1), split(text, 7)):
        out = run(pieces)
        calls = [c for c in out if isinstance(c, ToolCallDelta)]
        assert len(calls) == 1, out
        assert calls[0].name == "get_weather" and calls[0].call_id and calls[0].index == 0
        assert json.loads(calls[0].arguments) == {"city": "Paris"}
        assert not any(isinstance(c, TextDelta) and c.text.strip() for c in out), out


@pytest.mark.parametrize("text", [
    "The weather in Paris is sunny.",
    '{"name": "unknown_tool", "arguments": {}}',                      # not offered
    '{"name": "get_weather", "arguments": {"town": "Paris"}}',        # schema: city required, town not a parameter
    '{"name": "get_weather", "arguments": {"city": 3}}',              # schema: wrong type
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "k"}}',  # enum
    '{"answer": 42}',                                                 # ordinary JSON answer
    '```python\nprint("hi")\n```',
    "<b>bold</b> text",
    '{"name": "get_weather", "arguments": {"city": "Par',             # never closed
    '{{"name": "get_weather", "arguments": {"city": "Paris"}}, 1}',   # not one object in doubled braces
    '{{"name": "get_weather"}, {"arguments": {"city": "Paris"}}}',    # two objects in braces: not JSON inside
])
def test_anything_else_is_released_unchanged(text: str) -> None:
    for pieces in ([text], split(text, 1), split(text, 5)):
        out = run(pieces)
        assert not any(isinstance(c, ToolCallDelta) for c in out)
        assert "".join(c.text for c in out if isinstance(c, TextDelta)) == text


def test_plain_text_is_not_held_back() -> None:
    detector = TextToolCalls(FUNCTIONS)
    assert detector.feed("  ") == []  # leading whitespace waits for the first real character
    assert detector.feed("Hello") == [TextDelta("  Hello")]
    assert detector.feed(" world") == [TextDelta(" world")]  # then straight through


def test_a_non_call_object_is_released_within_its_first_key() -> None:
    detector = TextToolCalls(FUNCTIONS)
    assert detector.feed('{"ans') == []
    assert detector.feed('wer": ') == [TextDelta('{"answer": ')]


def test_no_offered_functions_means_pass_through() -> None:
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert run([text], functions={}) == [TextDelta(text)]


def test_a_list_of_calls_and_text_after_a_call() -> None:
    one = '{"name": "get_weather", "arguments": {"city": "%s"}}'
    text = f"[{one % 'Paris'}, {one % 'Oslo'}]"
    calls = [c for c in run(split(text)) if isinstance(c, ToolCallDelta)]
    assert [json.loads(c.arguments)["city"] for c in calls] == ["Paris", "Oslo"] and [c.index for c in calls] == [0, 1]
    out = run(['{"name": "get_weather", "arguments": {"city": "Paris"}} I will check that.'])
    assert isinstance(out[0], ToolCallDelta) and out[-1] == TextDelta(" I will check that.")


def test_scan_is_linear_on_a_long_call() -> None:
    big = "x" * 50_000
    text = '{"name": "get_weather", "arguments": {"city": "' + big + '"}}'
    calls = [c for c in run(split(text, 4)) if isinstance(c, ToolCallDelta)]
    assert len(calls) == 1 and len(json.loads(calls[0].arguments)["city"]) == 50_000


def test_schema_errors_and_offered_functions() -> None:
    assert schema_errors({"city": "x"}, WEATHER) == []
    assert schema_errors({}, WEATHER) == ["arguments.city is required"]
    assert schema_errors({"city": "x", "n": 1}, WEATHER) == ["arguments.n is not a parameter"]
    integer = {"properties": {"n": {"type": "integer"}}}
    assert schema_errors({"n": True}, integer) == ["arguments.n must be of type integer"]
    tools = [{"type": "function", "function": {"name": "f", "parameters": WEATHER}}, {"type": "other"}]
    assert offered_functions(tools) == {"f": WEATHER}


async def test_stream_turns_the_finish_into_tool_calls() -> None:
    async def source() -> AsyncIterator[Chunk]:
        yield TextDelta('{"name": "get_weather", ')
        yield TextDelta('"arguments": {"city": "Paris"}}')
        yield Finish("stop")

    out = [c async for c in text_tool_call_stream(source(), FUNCTIONS)]
    assert isinstance(out[0], ToolCallDelta) and out[-1] == Finish("tool_calls")


def test_a_written_out_call_is_recognised_as_not_an_answer() -> None:
    names = {"calculator", "get_weather"}
    assert written_call('{"name": "calculator", "arguments": {"expression": "17 * 23"}}', names)
    assert written_call('```json\n{"name": "get_weather", "arguments": {}}\n```', names)
    assert not written_call('{"name": "other", "arguments": {}}', names)
    assert not written_call('The call would be {"name": "calculator"}', names)
    assert not written_call('{"result": 391}', names)


def test_a_call_that_already_has_its_result_stays_text() -> None:
    messages = [
        {"role": "user", "content": "weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    answered = answered_calls(messages)
    assert answered == {("get_weather", '{"city": "Paris"}')}
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    detector = TextToolCalls(FUNCTIONS, answered=answered)
    out = detector.feed(text) + detector.finish()
    assert out == [TextDelta(text)] and detector.reason == "repeats a call that already has its result"
    other = TextToolCalls(FUNCTIONS, answered=answered)
    assert isinstance(other.feed(text.replace("Paris", "Oslo"))[0], ToolCallDelta)


def test_a_fenced_call_after_a_short_lead_in_is_added_at_the_end() -> None:
    text = ('To get the weather in Paris, you can use the following function call:\n\n```json\n'
            '{"name": "get_weather", "arguments": {"city": "Paris"}}\n```\nThis returns the weather.')
    detector = TextToolCalls(FUNCTIONS)
    streamed: list[Chunk] = []
    for piece in split(text, 5):
        streamed.extend(detector.feed(piece))
    assert "".join(c.text for c in streamed if isinstance(c, TextDelta)) == text  # nothing held back
    tail = detector.finish()
    assert len(tail) == 1 and isinstance(tail[0], ToolCallDelta) and json.loads(tail[0].arguments) == {"city": "Paris"}
    far = TextToolCalls(FUNCTIONS)
    far.feed("x" * 2000 + '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```')
    assert far.finish() == []  # a call deep inside an answer is an example, not a call


def test_the_first_fence_holding_a_valid_call_wins() -> None:
    text = ("I'll use the get_weather tool.\n```json\n{\"type\": \"function\"}\n```\n"
            '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```')
    detector = TextToolCalls(FUNCTIONS)
    detector.feed(text)
    tail = detector.finish()
    assert len(tail) == 1 and isinstance(tail[0], ToolCallDelta) and json.loads(tail[0].arguments) == {"city": "Paris"}
